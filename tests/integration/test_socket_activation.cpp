// Inherited listening sockets: systemd socket activation (LISTEN_PID/LISTEN_FDS, fd 3) and the
// spawn-fcgi convention (fd 0). The host is started here by fork+exec, so that the socket sits on
// the right fd and LISTEN_PID names the host's own pid, as systemd arranges it.
#include "harness.hpp"

#include <doctest/doctest.h>

#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

int bound_unix_socket(const std::string& path) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  REQUIRE(fd >= 0);
  sockaddr_un sun{};
  sun.sun_family = AF_UNIX;
  std::strncpy(sun.sun_path, path.c_str(), sizeof sun.sun_path - 1);
  REQUIRE(bind(fd, reinterpret_cast<sockaddr*>(&sun), sizeof sun) == 0);
  REQUIRE(listen(fd, 16) == 0);
  return fd;
}

// Starts fcgi-host with `socket` on fd `target` and, for systemd, LISTEN_PID set to its pid.
pid_t start_with_socket(int socket, int target, bool systemd, const std::vector<std::string>& args,
                        const std::string& log) {
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    dup2(socket, target);
    if (socket != target) close(socket);
    int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    dup2(out, 1);
    dup2(out, 2);
    if (systemd) {
      setenv("LISTEN_PID", std::to_string(getpid()).c_str(), 1);
      setenv("LISTEN_FDS", "1", 1);
    }
    std::vector<std::string> all{it::HostProcess::binary()};
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all)
      argv.push_back(a.data());
    argv.push_back(nullptr);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// TERM, then the checks the harness makes of a HostProcess: it exits, and its log holds no
// alert or sanitizer line.
void stop(pid_t pid, const std::string& log) {
  kill(pid, SIGTERM);
  bool gone = test_wait::wait_child_exit(pid, fcgi_test::Millis{10000}).has_value();
  if (!gone) {
    kill(pid, SIGKILL);
    waitpid(pid, nullptr, 0);
  }
  std::string text = it::read_file(log);
  INFO("host log:\n" << text);
  CHECK(gone);
  CHECK(it::alarming_lines(text).empty());
}

std::string ok_body(const std::string& address) {
  std::string body;
  it::wait_for(
      [&] {
        try {
          body = fcgi_test::Client::connect(address).request("GET", "/").body;
          return true;
        } catch (const fcgi_test::Error&) {
          return false;
        }
      },
      fcgi_test::Millis{5000});
  return body;
}

} // namespace

TEST_CASE("systemd socket activation: the passed socket is served, even with --listen set") {
  it::TempDir dir;
  std::string activated = dir.file("systemd.sock");
  std::string configured = dir.file("configured.sock");
  int fd = bound_unix_socket(activated);
  pid_t host = start_with_socket(fd, 3, true, {"--workers", "1", "--listen", "unix:" + configured},
                                 dir.file("host.log"));
  close(fd);
  CHECK(ok_body("unix:" + activated) == "OK");
  struct stat st;
  CHECK(stat(configured.c_str(), &st) != 0); // the configured path was never bound
  stop(host, dir.file("host.log"));
}

TEST_CASE("spawn-fcgi convention: a listening socket on fd 0 is served without --listen") {
  it::TempDir dir;
  std::string path = dir.file("fd0.sock");
  int fd = bound_unix_socket(path);
  pid_t host = start_with_socket(fd, 0, false, {"--workers", "2"}, dir.file("host.log"));
  close(fd);
  CHECK(ok_body("unix:" + path) == "OK");
  stop(host, dir.file("host.log"));
}

TEST_CASE("systemd socket activation with pools: the pool on the socket's address takes it") {
  it::TempDir dir;
  std::string activated = dir.file("systemd.sock");
  std::string other = dir.file("other.sock");
  std::string config = dir.write(
      "pools.conf", "workers = 1\n[web]\nlisten = unix:" + activated +
                        "\napp = hello\n[tools]\nlisten = unix:" + other + "\napp = echo\n");
  int fd = bound_unix_socket(activated);
  pid_t host = start_with_socket(fd, 3, true, {"--config", config}, dir.file("host.log"));
  close(fd);
  CHECK(ok_body("unix:" + activated) == "OK"); // the hello pool, on systemd's socket
  CHECK(ok_body("unix:" + other).find("uri=/") != std::string::npos); // echo, bound itself
  std::string log = it::read_file(dir.file("host.log"));
  INFO(log);
  CHECK(log.find("[web]: fcgi-host listening on systemd socket (fd 3)") != std::string::npos);
  CHECK(log.find("no pool serves it") == std::string::npos);
  stop(host, dir.file("host.log"));
  struct stat st;
  CHECK(stat(activated.c_str(), &st) == 0); // systemd's socket file stays: it is systemd's
}
