#include "process_manager/pidfile.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <fstream>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>

namespace process_manager {

[[noreturn]] static void fail(int err, const std::string& what) {
  throw std::system_error(err, std::generic_category(), what);
}

pid_t Pidfile::read(const std::string& path) {
  std::ifstream in(path);
  long pid = 0;
  if (!(in >> pid) || pid <= 0) return 0;
  return static_cast<pid_t>(pid);
}

Pidfile::Pidfile(std::string path) : path_(std::move(path)), pid_(getpid()) {
  pid_t old = read(path_);
  // EPERM: the process exists but belongs to someone else; it is alive all the same.
  if (old != 0 && old != pid_ && (kill(old, 0) == 0 || errno == EPERM))
    fail(EEXIST, "pidfile \"" + path_ + "\" names running process " + std::to_string(old));

  std::string tmp = path_ + ".XXXXXX";
  int fd = mkstemp(tmp.data());
  if (fd == -1) fail(errno, "mkstemp(\"" + tmp + "\") failed");
  std::string text = std::to_string(pid_) + "\n";
  bool ok = fchmod(fd, 0644) == 0 &&
            ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
  int err = errno;
  ::close(fd);
  if (!ok) {
    unlink(tmp.c_str());
    fail(err, "write(\"" + tmp + "\") failed");
  }
  if (rename(tmp.c_str(), path_.c_str()) == -1) {
    err = errno;
    unlink(tmp.c_str());
    fail(err, "rename(\"" + tmp + "\", \"" + path_ + "\") failed");
  }
}

Pidfile::~Pidfile() {
  // getpid() check: a forked child that somehow ran destructors must not remove the master's file.
  if (getpid() == pid_ && read(path_) == pid_) unlink(path_.c_str());
}

} // namespace process_manager
