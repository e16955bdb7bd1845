// Access control: --allow-clients, --user, the Unix socket's mode, and no master fd reaching a
// handler or an --exec program.
#include "checks.hpp"
#include "harness.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <fcntl.h>
#include <fstream>
#include <map>
#include <pwd.h>
#include <set>
#include <sstream>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

using fcgi_test::Millis;
using it::HostProcess;

namespace {

// The fd numbers a process has open, and the socket inodes behind them.
std::set<int> open_fds(pid_t pid) {
  std::set<int> fds;
  for (int fd = 0; fd < 1024; ++fd)
    if (access(("/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd)).c_str(), F_OK) == 0)
      fds.insert(fd);
  return fds;
}

std::set<std::string> socket_inodes(pid_t pid) {
  std::set<std::string> inodes;
  char target[256];
  for (int fd : open_fds(pid)) {
    std::string link = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
    ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
    if (n <= 0) continue;
    std::string t(target, static_cast<std::size_t>(n));
    if (t.starts_with("socket:[")) inodes.insert(t.substr(8, t.size() - 9));
  }
  return inodes;
}

// The inode of the Unix socket listening on `path`, from /proc/net/unix. A connection accepted
// on that socket, or still waiting in its queue (the harness's readiness probe), is listed with
// the same path and may come first: only the entry with __SO_ACCEPTCON in its flags listens.
std::string unix_socket_inode(const std::string& path) {
  constexpr unsigned long kAcceptCon = 0x10000;
  std::ifstream in("/proc/net/unix");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string num, refs, proto, flags, type, state, inode, p;
    fields >> num >> refs >> proto >> flags >> type >> state >> inode >> p;
    if ((std::strtoul(flags.c_str(), nullptr, 16) & kAcceptCon) == 0) continue;
    // Bound at the path in a directory nobody else writes; in a shared one, in a private
    // directory beside it, then renamed there (listen_socket.cpp): the kernel keeps the name
    // bind() was given, "DIR/.NAME-XXXXXX/s".
    const std::size_t slash = path.find_last_of('/');
    const std::string bound_prefix = path.substr(0, slash) + "/." + path.substr(slash + 1) + "-";
    if (p == path || (p.starts_with(bound_prefix) && p.ends_with("/s"))) return inode;
  }
  return "";
}

// A host on a loopback TCP port with --allow-clients.
it::HostOptions tcp_host(int port, const std::string& allowed) {
  it::HostOptions o;
  o.args = {
      "--app",           "hello", "--workers", "1", "--listen", "127.0.0.1:" + std::to_string(port),
      "--allow-clients", allowed};
  o.listen = it::Listen::AsGiven;
  return o;
}

std::string status_field(pid_t pid, const std::string& name) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with(name + ":")) return line.substr(name.size() + 1);
  return "";
}

} // namespace

TEST_SUITE("access control") {
  TEST_CASE("--allow-clients: a peer outside the list is closed unanswered, one inside served") {
    int port = it::free_tcp_port();
    HostProcess refused(tcp_host(port, "10.0.0.0/8, ::1"));
    auto c = fcgi_test::Client::connect("127.0.0.1:" + std::to_string(port));
    fcgi_test::Response r;
    try {
      r = c.request("GET", "/");
    } catch (const fcgi_test::Error&) {}
    CHECK_FALSE(r.ended);
    CHECK(it::wait_for(
        [&] { return !it::lines_with(refused.log(), "not in --allow-clients").empty(); },
        Millis{2000}));

    int port2 = it::free_tcp_port();
    HostProcess allowed(tcp_host(port2, "127.0.0.0/8"));
    CHECK(
        fcgi_test::Client::connect("127.0.0.1:" + std::to_string(port2)).request("GET", "/").body ==
        "OK");
  }

  TEST_CASE("--socket-mode is on the socket file, --user runs workers unprivileged") {
    if (geteuid() != 0) return; // needs root to change user
    passwd* nobody = getpwnam("nobody");
    REQUIRE(nobody != nullptr);
    HostProcess host(
        {"--app", "hello", "--workers", "2", "--socket-mode", "0600", "--user", "nobody"});
    struct stat st {};
    REQUIRE(stat(host.address().substr(5).c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0600);
    CHECK(st.st_uid == 0); // the socket keeps its owner; root binds before the drop
    CHECK(host.connect().request("GET", "/").body == "OK");
    auto workers = host.wait_workers(2);
    REQUIRE(workers.size() == 2);
    std::string nobody_uid = std::to_string(nobody->pw_uid);
    for (pid_t w : workers) {
      // A worker just forked drops its privileges while it boots: wait for that, bounded.
      std::string real, effective, saved;
      it::wait_for(
          [&] {
            std::istringstream uids(status_field(w, "Uid")); // real, effective, saved, fs
            uids >> real >> effective >> saved;
            return real == nobody_uid && effective == nobody_uid && saved == nobody_uid;
          },
          Millis{5000});
      CHECK(real == nobody_uid);
      CHECK(effective == nobody_uid);
      CHECK(saved == nobody_uid);
    }
    std::istringstream master_uids(status_field(host.pid(), "Uid"));
    std::string master_uid;
    master_uids >> master_uid;
    CHECK(master_uid == "0");
  }

  TEST_CASE("no master socket reaches a worker: the status socket stays the master's") {
    HostProcess host(
        {"--app", "hello", "--workers", "1", "--status-listen", "unix:{dir}/status.sock"});
    auto workers = host.wait_workers(1);
    REQUIRE(workers.size() == 1);
    std::string status_inode = unix_socket_inode(host.dir().file("status.sock"));
    REQUIRE(!status_inode.empty());
    CHECK(socket_inodes(host.pid()).count(status_inode) == 1);
    CHECK(socket_inodes(workers[0]).count(status_inode) == 0);
    std::string listen_inode = unix_socket_inode(host.address().substr(5));
    CHECK(socket_inodes(workers[0]).count(listen_inode) == 1);
  }

  TEST_CASE("--exec: the program gets the socket on fd 0, stdout and stderr, nothing else") {
    // --listen first: after `--`, every word is the program's.
    it::HostOptions o;
    o.args = {"--workers",
              "1",
              "--listen",
              "unix:{dir}/host.sock",
              "--exec",
              "/bin/sh",
              "--",
              "-c",
              "ls /proc/self/fd > {dir}/fds.txt; exec sleep 30"};
    o.listen = it::Listen::AsGiven;
    o.wait_ready = false;
    // The program writes its report into the test's private directory: it keeps the test's user
    // (root in CI) rather than nobody, with whom it could not.
    if (geteuid() == 0) o.args.insert(o.args.begin(), {"--user", "root"});
    HostProcess host(o);
    REQUIRE(it::wait_for([&] { return !it::read_file(host.dir().file("fds.txt")).empty(); },
                         Millis{5000}));
    std::istringstream listed(it::read_file(host.dir().file("fds.txt")));
    std::set<std::string> fds;
    for (std::string fd; listed >> fd;)
      fds.insert(fd);
    INFO("fds of the --exec program: " << it::read_file(host.dir().file("fds.txt")));
    // What ls inherits from the program, and its own fd 3 on /proc/self/fd.
    CHECK(fds == std::set<std::string>{"0", "1", "2", "3"});
  }

  TEST_CASE("--status-allow fails closed on a REMOTE_ADDR it cannot parse, `unix` lets Unix "
            "clients in") {
    HostProcess host({"--app", "echo", "--workers", "1", "--status-path", "/status", "--ping-path",
                      "/ping", "--status-allow", "127.0.0.1"});
    auto c = host.connect();
    for (const char* addr : {"", "unix:", "010.0.0.1", "127.000.0.1", "fe80::1%eth0", "::1"}) {
      CAPTURE(addr);
      CHECK(c.request("GET", "/status", "", {{"REMOTE_ADDR", addr}}).status == 403);
      CHECK(c.request("GET", "/ping", "", {{"REMOTE_ADDR", addr}}).status == 403);
    }
    fcgi_test::Request absent;
    absent.uri = "/status";
    absent.params = fcgi_test::standard_params("GET", "/status", 0);
    std::erase_if(*absent.params, [](const auto& p) { return p.first == "REMOTE_ADDR"; });
    CHECK(c.request(absent).status == 403);
    CHECK(c.request("GET", "/status", "", {{"REMOTE_ADDR", "127.0.0.1"}}).status == 200);

    HostProcess with_unix({"--app", "echo", "--workers", "1", "--status-path", "/status",
                           "--status-allow", "127.0.0.1, unix"});
    auto u = with_unix.connect();
    CHECK(u.request("GET", "/status", "", {{"REMOTE_ADDR", "unix:"}}).status == 200);
    CHECK(u.request(absent).status == 200);
    CHECK(u.request("GET", "/status", "", {{"REMOTE_ADDR", "010.0.0.1"}}).status == 403);
  }

  TEST_CASE("an empty --allow-clients or --status-allow is a config error naming the option") {
    struct Case {
      std::vector<std::string> args;
      std::map<std::string, std::string> files;
      std::string option;
    };
    std::vector<Case> cases{
        {{"--allow-clients", ""}, {}, "--allow-clients"},
        {{"--allow-clients", " , "}, {}, "--allow-clients"},
        {{"--status-allow", ""}, {}, "--status-allow"},
        {{"--config", "{dir}/h.conf"}, {{"h.conf", "allow-clients = ,\n"}}, "allow-clients"},
    };
    for (Case& c : cases) {
      c.args.insert(c.args.end(), {"--app", "hello", "--listen", "unix:{dir}/s.sock"});
      it::RunResult r = it::run_host(it::HostOptions{c.args, c.files, it::Listen::AsGiven});
      INFO("output:\n" << r.output);
      CHECK(r.status == 2);
      CHECK(r.output.find(c.option) != std::string::npos);
      CHECK(r.output.find("empty") != std::string::npos);
    }
  }

  TEST_CASE("stray descriptors inherited from the starting process are closed at start") {
    // This test process plays the careless shell: an open file without close-on-exec.
    it::TempDir dir;
    std::string secret = dir.write("secret.txt", "not for handlers\n");
    int stray = ::open(secret.c_str(), O_RDONLY); // deliberately not O_CLOEXEC
    REQUIRE(stray >= 3);
    auto points_at_secret = [&](pid_t pid) {
      char target[512];
      for (int fd : open_fds(pid)) {
        std::string link = "/proc/" + std::to_string(pid) + "/fd/" + std::to_string(fd);
        ssize_t n = readlink(link.c_str(), target, sizeof target - 1);
        if (n > 0 && std::string(target, static_cast<std::size_t>(n)) == secret) return true;
      }
      return false;
    };
    HostProcess host({"--app", "hello", "--workers", "2"});
    ::close(stray);
    auto workers = host.wait_workers(2);
    REQUIRE(workers.size() == 2);
    CHECK_FALSE(points_at_secret(host.pid()));
    for (pid_t w : workers)
      CHECK_FALSE(points_at_secret(w));
    auto closed = it::lines_with(host.log(), "inherited from the starting process");
    REQUIRE(closed.size() == 1);
    CHECK(closed[0].find(" " + std::to_string(stray)) != std::string::npos);
    CHECK(host.connect().request("GET", "/").body == "OK");
  }
}
