// USR2: what the old master hands the new one across exec, through the environment
// (fcgi_host/cli/upgrade_handover.hpp). Real descriptors, one process: the export and the take
// are the two ends of one exec.
#include "fcgi_host/cli/upgrade_handover.hpp"

#include <algorithm>
#include <cstdlib>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <string>
#include <unistd.h>

using namespace fcgi_host;

namespace {
constexpr const char* kVariables[] = {"FCGI_HOST_LISTEN_FD",       "FCGI_HOST_UPGRADE_FD",
                                      "FCGI_HOST_HANDOFF_SEND_FD", "FCGI_HOST_HANDOFF_RECV_FD",
                                      "FCGI_HOST_PIDFILE_FD",      "FCGI_HOST_SOCKET_FILE",
                                      "FCGI_HOST_STATUS_FD",       "FCGI_HOST_STATUS_FILE",
                                      "FCGI_HOST_HEALTH_FD",       "FCGI_HOST_HEALTH_FILE"};

bool close_on_exec(int fd) {
  return (::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0;
}

// Descriptors made close-on-exec, closed at the end of the test.
struct Fds {
  int fd[8];
  Fds() {
    for (int i = 0; i < 8; i += 2)
      REQUIRE(::pipe2(fd + i, O_CLOEXEC) == 0);
  }
  ~Fds() {
    for (int f : fd)
      ::close(f);
    for (const char* v : kVariables)
      ::unsetenv(v);
  }
};
} // namespace

TEST_CASE("upgrade handover: every fd crosses exec under its name and comes back, once") {
  Fds fds;
  UpgradeHandover out;
  out.listen_fd = fds.fd[0];
  out.ready_fd = fds.fd[1];
  out.pidfile_fd = fds.fd[2];
  out.handoff = HandoffChannel{fds.fd[3], fds.fd[4]};
  out.socket_file = SocketFile::from_text("/run/a.sock", "64768:1234");
  out.status_fd = fds.fd[5];
  out.status_file = SocketFile::from_text("/run/status.sock", "64768:99");
  out.health_fd = fds.fd[6];
  out.health_file = SocketFile::from_text("/run/health.sock", "64768:7");
  REQUIRE(export_handover(out));
  CHECK_FALSE(close_on_exec(out.health_fd));
  CHECK_FALSE(close_on_exec(out.status_fd));
  CHECK_FALSE(close_on_exec(out.listen_fd));
  CHECK_FALSE(close_on_exec(out.pidfile_fd));
  CHECK_FALSE(close_on_exec(out.handoff.send_fd));
  CHECK(std::getenv("FCGI_HOST_LISTEN_FD") == std::to_string(out.listen_fd));
  CHECK(std::getenv("FCGI_HOST_SOCKET_FILE") == std::string("64768:1234"));

  std::vector<int> keep = inherited_fds_to_keep();
  for (int fd : {fds.fd[0], fds.fd[1], fds.fd[2], fds.fd[3], fds.fd[4], fds.fd[5], fds.fd[6]})
    CHECK(std::count(keep.begin(), keep.end(), fd) == 1);

  UpgradeHandover in = take_handover("/run/a.sock", "/run/status.sock", "/run/health.sock");
  CHECK(in.listen_fd == out.listen_fd);
  CHECK(in.ready_fd == out.ready_fd);
  CHECK(in.pidfile_fd == out.pidfile_fd);
  CHECK(in.socket_file.path() == "/run/a.sock"); // removed at the stop only while it is that file
  CHECK(in.socket_file.to_text() == "64768:1234");
  CHECK(close_on_exec(in.listen_fd)); // the new master's workers must not inherit them
  CHECK(close_on_exec(in.pidfile_fd));
  // The status socket too: the new master serves on it, and removes its path at its stop.
  CHECK(in.status_fd == out.status_fd);
  CHECK(close_on_exec(in.status_fd));
  CHECK(in.status_file.path() == "/run/status.sock");
  CHECK(in.status_file.to_text() == "64768:99");
  // And the health port, likewise.
  CHECK(in.health_fd == out.health_fd);
  CHECK(close_on_exec(in.health_fd));
  CHECK(in.health_file.path() == "/run/health.sock");
  CHECK(in.health_file.to_text() == "64768:7");
  HandoffChannel channel = take_handoff_channel();
  CHECK(channel.send_fd == out.handoff.send_fd);
  CHECK(channel.recv_fd == out.handoff.recv_fd);
  CHECK(close_on_exec(channel.recv_fd));
  for (const char* v : kVariables)
    CHECK(std::getenv(v) == nullptr); // taken: a later upgrade sees no stale number
  CHECK(take_handover("/unused", "", "").listen_fd == -1);
  CHECK_FALSE(take_handoff_channel().enabled());
}

TEST_CASE(
    "upgrade handover: a closed or malformed fd is not taken, a bad listen fd stops the export") {
  Fds fds;
  int closed = ::dup(fds.fd[0]);
  ::close(closed);
  ::setenv("FCGI_HOST_LISTEN_FD", std::to_string(closed).c_str(), 1);
  ::setenv("FCGI_HOST_UPGRADE_FD", "7x", 1);
  ::setenv("FCGI_HOST_PIDFILE_FD", "", 1);
  ::setenv("FCGI_HOST_SOCKET_FILE", "1:2", 1);
  ::setenv("FCGI_HOST_STATUS_FD", std::to_string(closed).c_str(), 1);
  ::setenv("FCGI_HOST_STATUS_FILE", "1:3", 1);
  ::setenv("FCGI_HOST_HEALTH_FD", "-3", 1);
  ::setenv("FCGI_HOST_HEALTH_FILE", "1:4", 1);
  UpgradeHandover in = take_handover("/tmp/x.sock", "/tmp/status.sock", "/tmp/health.sock");
  CHECK(in.health_fd == -1);
  CHECK(in.health_file.empty());
  CHECK(in.status_fd == -1);
  CHECK(in.status_file.empty());
  CHECK(in.listen_fd == -1);
  CHECK(in.ready_fd == -1);
  CHECK(in.pidfile_fd == -1);
  CHECK(in.socket_file.empty()); // without the socket, the file is not ours to remove
  CHECK(std::getenv("FCGI_HOST_SOCKET_FILE") == nullptr);

  UpgradeHandover out;
  out.listen_fd = closed;
  CHECK_FALSE(export_handover(out));
}

TEST_CASE("upgrade handover: the binary to exec is the file at our own path") {
  std::string exe = own_executable();
  CHECK(exe.starts_with("/"));
  CHECK(::access(exe.c_str(), X_OK) == 0);
}
