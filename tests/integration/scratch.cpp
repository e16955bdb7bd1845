// What a test borrows from the machine: a free port, and what /proc
// says about processes.
#include "harness.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace it {

using fcgi_test::Error;

std::string workers_fixture(const std::string& program) {
  if (::geteuid() != 0 || program.empty()) return program;
  const char* tmp = std::getenv("TMPDIR");
  const std::filesystem::path dir = std::string(tmp && *tmp == '/' ? tmp : "/tmp") + "/fixtures";
  const std::filesystem::path copy = dir / std::filesystem::path(program).filename();
  if (std::filesystem::exists(copy)) return copy.string();
  std::filesystem::create_directories(dir);
  std::filesystem::permissions(
      dir, std::filesystem::perms::owner_all | std::filesystem::perms::group_read |
               std::filesystem::perms::group_exec | std::filesystem::perms::others_read |
               std::filesystem::perms::others_exec);
  std::filesystem::copy_file(program, copy); // with its mode: 0755, as the build made it
  return copy.string();
}

int free_tcp_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0; // the kernel picks a free one
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) ::close(fd);
    throw Error(std::string("finding a free port: ") + std::strerror(errno));
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

// ---- /proc -------------------------------------------------------------------------------------

std::vector<pid_t> child_pids(pid_t parent) {
  return test_support::running_pids(
      [parent](const test_support::ProcStat& s) { return s.ppid == parent; });
}

std::vector<pid_t> pids_in_group(pid_t pgid) {
  return test_support::running_pids(
      [pgid](const test_support::ProcStat& s) { return s.pgrp == pgid; });
}

bool holds_open(pid_t pid, const std::string& path) {
  std::error_code ec;
  std::filesystem::directory_iterator fds("/proc/" + std::to_string(pid) + "/fd", ec);
  for (; !ec && fds != std::filesystem::directory_iterator(); fds.increment(ec)) {
    std::error_code link_ec;
    if (std::filesystem::read_symlink(fds->path(), link_ec) == path) return true;
  }
  return false;
}

} // namespace it
