#include "fcgi_host/sandbox/private_tmp.hpp"

#include "fcgi_host/sys_error.hpp"
#include "process_manager/fork_clean.hpp"

#include <fcntl.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fcgi_host {
namespace {

// In the child: its own mount namespace, nothing of it propagated back, a fresh /tmp. Reports
// one byte (0: done, else the errno) and waits until the master has opened the namespace.
[[noreturn]] void make_namespace(int report, int hold) {
  int err = 0;
  if (::unshare(CLONE_NEWNS) != 0 ||
      ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
      ::mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=1777") != 0)
    err = errno;
  unsigned char byte = static_cast<unsigned char>(err);
  (void)!::write(report, &byte, 1);
  char none;
  (void)!::read(hold, &none, 1); // returns at EOF: the master closed its end
  _exit(0);
}

int make_private_tmp(std::string& error) {
  int report[2], hold[2];
  if (::pipe2(report, O_CLOEXEC) != 0) {
    error = sys_error("pipe2", "--private-tmp");
    return -1;
  }
  if (::pipe2(hold, O_CLOEXEC) != 0) {
    error = sys_error("pipe2", "--private-tmp");
    ::close(report[0]);
    ::close(report[1]);
    return -1;
  }
  // The one fork of the house: no handler of the master runs in the child.
  const pid_t child = process_manager::fork_clean([&](const sigset_t&) {
    ::close(report[0]);
    ::close(hold[1]);
    make_namespace(report[1], hold[0]);
  });
  ::close(report[1]);
  ::close(hold[0]);
  int fd = -1;
  unsigned char byte = 255;
  if (child < 0) {
    error = sys_error("fork", "--private-tmp");
  } else if (::read(report[0], &byte, 1) != 1) {
    error = "--private-tmp: the child making the namespace died";
  } else if (byte != 0) {
    error = sys_error("unshare/mount", "/tmp (--private-tmp)", byte);
  } else {
    std::string ns = "/proc/" + std::to_string(child) + "/ns/mnt";
    fd = ::open(ns.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) error = sys_error("open", ns);
  }
  ::close(report[0]);
  ::close(hold[1]);
  if (child > 0)
    while (::waitpid(child, nullptr, 0) < 0 && errno == EINTR) {}
  return fd;
}

} // namespace

int private_tmp_namespace(std::string& error) {
  static int fd = -1;
  if (fd < 0) fd = make_private_tmp(error);
  return fd;
}

} // namespace fcgi_host
