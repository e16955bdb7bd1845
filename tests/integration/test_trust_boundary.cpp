// The root master's trust boundary (docs/security.md, "Trust boundary"), from the outside: what
// a request, a handler or a local user can make the host write or show. Request data in the
// error log stays on its line; status is closed by default (a TCP listener needs its allow-list,
// in-flight query strings are redacted, the shipped nginx snippet lets only local clients ask);
// the snippet's internal location serves only the directory it names.
#include "checks.hpp"
#include "support/skip.hpp"
#include "throwaway_user.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <csignal>
#include <netinet/in.h>
#include <pwd.h>
#include <set>
#include <sstream>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include <string>

using fcgi_test::Millis;
using it::HostProcess;
using it::NginxProcess;

namespace {

using it::has;

// The block `location <name> { ... }` of the shipped nginx snippet, as written there.
std::string shipped_nginx_location(const std::string& name) {
  const std::string conf =
      it::read_file(std::string(FCGI_HOST_SOURCE_DIR) + "/conf/nginx-fcgi-host.conf");
  const std::size_t at = conf.find("    location " + name + " {");
  REQUIRE(at != std::string::npos);
  const std::size_t end = conf.find("\n    }\n", at);
  REQUIRE(end != std::string::npos);
  return conf.substr(at, end + 7 - at);
}

std::string replaced(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at; (at = text.find(from)) != std::string::npos;)
    text.replace(at, from.size(), to);
  return text;
}

// The status code of `GET target` to 127.0.0.1:port, sent from the loopback address `from`
// (127.0.0.2 is loopback to the kernel, but not the 127.0.0.1 nginx's allow names). -1: no answer.
int http_status_from(const char* from, int port, const std::string& target) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  timeval tv{5, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  ::inet_pton(AF_INET, from, &a.sin_addr);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  sockaddr_in to{};
  to.sin_family = AF_INET;
  to.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
  int status = -1;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&to), sizeof to) == 0) {
    const std::string request = "GET " + target + " HTTP/1.0\r\nHost: localhost\r\n\r\n";
    if (::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
      char line[64] = {};
      if (::read(fd, line, sizeof line - 1) > 12) status = std::atoi(line + 9); // "HTTP/1.1 403"
    }
  }
  ::close(fd);
  return status;
}

} // namespace

TEST_SUITE("trust boundary") {

  TEST_CASE("an error-log line from a URI with a newline stays one line") {
    HostProcess host({"--app", "echo", "--workers", "1"});
    const std::string forged = "2026-01-01 00:00:00.000 [notice] 1: forged\r";
    fcgi_test::Response r = host.connect().request("GET", "/throw?a\n" + forged + "\x1b[2J");
    CHECK(r.status == 500);
    REQUIRE(host.wait_log("handler failed on GET /throw"));
    std::vector<std::string> lines = it::lines_with(host.log(), "forged");
    INFO(host.log());
    REQUIRE(lines.size() == 1);
    CHECK(has(lines[0], "handler failed on GET /throw?a\\x0a2026-01-01 00:00:00.000 [notice] 1: "
                        "forged\\x0d\\x1b[2J"));
    it::check_no_alerts(host);
  }

  TEST_CASE("the status page's in-flight URIs have their secrets redacted, as captures do") {
    HostProcess host({"--app", "echo", "--workers", "2", "--status-path", "/status",
                      "--status-listen", "unix:{dir}/status.sock"});
    REQUIRE(host.wait_workers(2).size() == 2);
    auto held = host.connect();
    fcgi_test::Request slow;
    slow.uri = "/echo?delay_ms=2000&api_token=tok-5be1&password=pw-77aa&page=3";
    held.send_request(slow);
    REQUIRE(host.wait_active(1));
    const std::string full = host.status_json(true);
    fcgi_test::Response page = host.connect().request("GET", "/status?json&full");
    for (const std::string& body : {full, page.body}) {
      INFO(body);
      CHECK(has(body, "/echo?delay_ms=2000&api_token=xxxxxxxx&password=xxxxxxx&page=3"));
      CHECK_FALSE(has(body, "tok-5be1"));
      CHECK_FALSE(has(body, "pw-77aa"));
    }
    held.read_response(1);
  }

  TEST_CASE("the shipped nginx snippet: /status only for local clients, the internal location "
            "only for the directory it names") {
    // --user root: the files are in a private temp dir of root's (nginx runs as root too).
    HostProcess host({"--app", FCGI_TEST_HANDLER_API_PLUGIN, "--workers", "1", "--user", "root",
                      "--send-file-mode", "x-accel-redirect", "--status-path", "/status",
                      "--status-allow", "127.0.0.0/8"});
    it::TempDir files;
    const std::string page = files.write("page.html", "<p>hi</p>\n");
    const std::string outside = it::TempDir().write("secret.txt", "root:x:0:0\n");
    const std::string upstream = "unix:" + host.address().substr(5);
    const std::string extra =
        replaced(replaced(shipped_nginx_location("= /status"), "fastcgi_pass fcgi_host;",
                          "fastcgi_pass " + upstream + ";"),
                 "include fastcgi_params;", "include /etc/nginx/fastcgi_params;") +
        replaced(shipped_nginx_location("/internal/srv/fcgi-host/files/"), "/srv/fcgi-host/files/",
                 files.path() + "/");
    NginxProcess nginx({.fastcgi_address = host.address(), .server_extra = extra});
    INFO("nginx error log:\n" << nginx.error_log());

    CHECK(http_status_from("127.0.0.1", nginx.port(), "/status") == 200);
    // A client nginx does not allow: refused by nginx, although the host's list would take it.
    CHECK(http_status_from("127.0.0.2", nginx.port(), "/status") == 403);

    it::HttpResponse inside = it::http_request(nginx.port(), "GET", "/file?path=" + page);
    CHECK(inside.status == 200);
    CHECK(inside.body == "<p>hi</p>\n");
    // A file elsewhere: no internal location serves it (the host answers the redirected URI).
    it::HttpResponse elsewhere = it::http_request(nginx.port(), "GET", "/file?path=" + outside);
    CHECK_FALSE(has(elsewhere.body, "root:x:0:0"));
    CHECK(it::http_request(nginx.port(), "GET", "/internal" + page).status == 404);
  }
}

namespace {

// A start that must be refused: its exit status and output.
it::RunResult start(const std::vector<std::string>& args) {
  return it::run_host(it::HostOptions{args, {}, it::Listen::AsGiven});
}

} // namespace

// Paths the root master creates or opens are checked, not trusted (path_checks.hpp): a link
// planted where a log, the pidfile or the socket will be is refused, not followed; a directory
// another user can write is refused; a pidfile or log of another user's is refused. What was
// there is left as it was.
TEST_SUITE("trust boundary") {

  TEST_CASE("a symlink planted at the log path, the pidfile path or the socket path is refused, "
            "not followed") {
    if (::geteuid() != 0) {
      return test_support::skip("needs root (the master's checks are those of a root master)");
    }
    it::TempDir d;
    const std::string victim = d.write("victim", "untouched\n");
    for (const std::string option : {"--error-log", "--access-log", "--pidfile", "--listen"}) {
      CAPTURE(option);
      const std::string link = d.file("planted" + option);
      REQUIRE(::symlink(victim.c_str(), link.c_str()) == 0);
      std::vector<std::string> args = {"--app", "hello", "--workers", "1"};
      if (option == "--listen")
        args.insert(args.end(), {"--listen", "unix:" + link});
      else
        args.insert(args.end(), {"--listen", "unix:" + d.file("s.sock"), option, link});
      it::RunResult r = start(args);
      INFO(r.output);
      CHECK(r.status != 0);
      CHECK(r.status != -1);
      CHECK((has(r.output, "symbolic link") || has(r.output, "is not a socket")));
      CHECK(it::read_file(victim) == "untouched\n");
      struct stat st {};
      REQUIRE(::lstat(link.c_str(), &st) == 0);
      CHECK(S_ISLNK(st.st_mode)); // left as it was
    }
  }

  TEST_CASE("a socket or log directory writable by others is refused, with the sticky bit it is "
            "taken") {
    if (::geteuid() != 0) {
      return test_support::skip("needs root (the master's checks are those of a root master)");
    }
    it::TempDir d;
    const std::string open_dir = d.file("open");
    REQUIRE(::mkdir(open_dir.c_str(), 0777) == 0);
    REQUIRE(::chmod(open_dir.c_str(), 0777) == 0);
    it::RunResult sock = start({"--app", "hello", "--listen", "unix:" + open_dir + "/s.sock"});
    INFO(sock.output);
    CHECK(sock.status == 3); // a start failure
    CHECK(has(sock.output, "directory \"" + open_dir + "\" is writable by others (mode 0777)"));
    it::RunResult log = start({"--app", "hello", "--listen", "unix:" + d.file("s.sock"),
                               "--error-log", open_dir + "/error.log"});
    INFO(log.output);
    CHECK(log.status != 0);
    CHECK(has(log.output, "is writable by others"));
    CHECK(::access((open_dir + "/error.log").c_str(), F_OK) != 0);

    REQUIRE(::chmod(open_dir.c_str(), 01777) == 0); // as /tmp
    HostProcess host(
        {.args = {"--app", "hello", "--workers", "1", "--listen", "unix:" + open_dir + "/s.sock",
                  "--error-log", open_dir + "/error.log"},
         .files = {},
         .listen = it::Listen::AsGiven});
    CHECK(host.connect().request("GET", "/").status == 200);
  }

  TEST_CASE("a pidfile or a log file owned by another user is refused") {
    if (::geteuid() != 0) {
      return test_support::skip("needs root (to give a file to another user)");
    }
    passwd* nobody = ::getpwnam("nobody");
    REQUIRE(nobody);
    it::TempDir d;
    for (const std::string option : {"--pidfile", "--error-log", "--access-log"}) {
      CAPTURE(option);
      const std::string file = d.write("theirs" + option, "1\n");
      REQUIRE(::chown(file.c_str(), nobody->pw_uid, nobody->pw_gid) == 0);
      it::RunResult r = start({"--app", "hello", "--workers", "1", "--listen",
                               "unix:" + d.file("s.sock"), option, file});
      INFO(r.output);
      CHECK(r.status != 0);
      CHECK(r.status != -1);
      CHECK(has(r.output, "owned by uid " + std::to_string(nobody->pw_uid)));
      CHECK(it::read_file(file) == "1\n");
    }
  }

  TEST_CASE("a TCP status listener without an allow-list is refused at start, exit 2, one line") {
    it::RunResult r = start({"--app", "hello", "--listen", "unix:{dir}/s.sock", "--status-listen",
                             "127.0.0.1:" + std::to_string(it::free_tcp_port())});
    INFO(r.output);
    CHECK(r.status == 2);
    CHECK(has(r.output, "--status-listen: a TCP status listener needs --status-allow"));
    CHECK(std::count(r.output.begin(), r.output.end(), '\n') == 1);
  }

  TEST_CASE("a config file or an included one that another user can change is refused as root") {
    if (::geteuid() != 0) {
      return test_support::skip("needs root (the check is a root master's)");
    }
    passwd* nobody = ::getpwnam("nobody");
    REQUIRE(nobody);
    it::TempDir d;
    const std::string pool = "[a]\nlisten = unix:" + d.file("a.sock") + "\napp = hello\n";
    d.write("pools.d/a.conf", pool);
    const std::string main = d.write("main.conf", "include = pools.d/*.conf\n");
    it::Command safe = it::run_binary("--config " + main + " --test-config");
    CHECK_MESSAGE(safe.status == 0, safe.output);

    const std::string included = d.file("pools.d/a.conf");
    REQUIRE(::chmod(included.c_str(), 0666) == 0);
    it::Command writable = it::run_binary("--config " + main + " --test-config");
    CHECK(writable.status == 2);
    CHECK_MESSAGE(has(writable.output, "\"" + included +
                                           "\" refused: writable by others (mode "
                                           "0666)"),
                  writable.output);
    REQUIRE(::chmod(included.c_str(), 0644) == 0);
    REQUIRE(::chown(included.c_str(), nobody->pw_uid, nobody->pw_gid) == 0);
    it::Command theirs = it::run_binary("--config " + main + " --test-config");
    CHECK(theirs.status == 2);
    CHECK_MESSAGE(has(theirs.output, "owned by uid " + std::to_string(nobody->pw_uid)),
                  theirs.output);
    REQUIRE(::chown(included.c_str(), 0, 0) == 0);
    REQUIRE(::chmod(d.file("pools.d").c_str(), 0777) == 0);
    it::Command open_dir = it::run_binary("--config " + main + " --test-config");
    CHECK(open_dir.status == 2);
    CHECK_MESSAGE(has(open_dir.output, "is writable by others (mode 0777)"), open_dir.output);
  }

  TEST_CASE("workers as root (user or group) and the echo app in a config file are said at warn "
            "level at every start") {
    const bool root = ::geteuid() == 0;
    HostProcess host(it::HostOptions{
        .args = {"--config", "{dir}/host.conf"},
        .files = {{"host.conf",
                   std::string("app = echo\nworkers = 1\n") + (root ? "user = root\n" : "")}},
    });
    CHECK(host.wait_log(R"(\[warn\] [0-9]+: app echo is the built-in test app)"));
    if (root) CHECK(host.wait_log(R"(\[warn\] [0-9]+: workers run as root \(user = root\))"));
    it::Command check =
        it::run_binary("--config " + host.dir().file("host.conf") + " --test-config");
    CHECK(check.status == 0);
    CHECK(has(check.output, "fcgi-host: warning: app echo is the built-in test app"));
    if (root) {
      // --group root is root's files by their group's bits: said as --user root is.
      it::Command group = it::run_binary("--app hello --user nobody --group root --test-config");
      CHECK(group.status == 0);
      CHECK_MESSAGE(has(group.output, "fcgi-host: warning: workers run with group root"),
                    group.output);
    }
    // On the command line it is a trial, not a deployment: nothing said.
    it::Command trial = it::run_binary("--app echo --test-config");
    CHECK(trial.status == 0);
    CHECK_FALSE(has(trial.output, "warning"));
  }

  TEST_CASE("log rotation with workers of another user: after USR1 the master hands them the new "
            "files") {
    it::ThrowawayUser user;
    if (!user.made()) {
      return test_support::skip(user.why_not());
    }
    HostProcess host({"--app", "echo", "--workers", "2", "--user", user.name(), "--error-log",
                      "{dir}/error.log", "--access-log", "{dir}/access.log", "--access-format",
                      "%m %u %s %p"});
    const std::string access = host.dir().file("access.log");
    const std::string error = host.dir().file("error.log");
    auto lines = [](const std::string& file, const std::string& what) {
      return it::lines_with(it::read_file(file), what).size();
    };
    for (int i = 0; i < 4; ++i)
      CHECK(host.connect().request("GET", "/before").status == 200);
    REQUIRE(it::wait_for([&] { return lines(access, "GET /before") == 4; }, Millis{5000}));

    // logrotate's way: rename, then USR1. The workers cannot open the new root-owned files in
    // the root-only directory themselves.
    REQUIRE(::rename(access.c_str(), (access + ".1").c_str()) == 0);
    REQUIRE(::rename(error.c_str(), (error + ".1").c_str()) == 0);
    host.signal(SIGUSR1);
    REQUIRE(host.wait_log("USR1: logs reopened"));
    REQUIRE(it::wait_for(
        [&] {
          auto workers = host.worker_pids();
          return workers.size() == 2 && std::none_of(workers.begin(), workers.end(), [&](pid_t w) {
                   return it::holds_open(w, access + ".1") || it::holds_open(w, error + ".1");
                 });
        },
        Millis{5000}));
    for (int i = 0; i < 6; ++i)
      CHECK(host.connect().request("GET", "/after").status == 200);
    REQUIRE(it::wait_for([&] { return lines(access, "GET /after") == 6; }, Millis{5000}));
    CHECK(lines(access + ".1", "GET /after") == 0);
    CHECK(lines(access + ".1", "GET /before") == 4);
    CHECK(lines(error, "could not") == 0);
    CHECK(lines(error + ".1", "reopen") == 0); // no worker failed to reopen
    // Nothing was made the workers' user's: the new files are the master's, 0640.
    for (const std::string& file : {access, error}) {
      struct stat st {};
      REQUIRE(::stat(file.c_str(), &st) == 0);
      CHECK(st.st_uid == 0);
      CHECK((st.st_mode & 0777) == 0640);
    }
  }

  TEST_CASE("a Unix socket keeps its name where nobody else writes its directory, in a shared "
            "sticky one it is bound beside it and renamed") {
    // The names /proc/net/unix (and so `ss -lx`) shows for listening sockets.
    auto names_in_proc = [] {
      std::set<std::string> names;
      std::istringstream in(it::read_file("/proc/net/unix"));
      for (std::string line; std::getline(in, line);)
        if (std::size_t at = line.rfind(' '); at != std::string::npos && line[at + 1] == '/')
          names.insert(line.substr(at + 1));
      return names;
    };
    {
      HostProcess own({"--app", "hello", "--workers", "1"}); // its temp directory: 0700
      const std::string path = own.address().substr(5);
      CHECK(names_in_proc().count(path) == 1);
    }
    it::TempDir shared;
    REQUIRE(::chmod(shared.path().c_str(), 01777) == 0);
    const std::string path = shared.file("app.sock");
    HostProcess host(HostOptions{
        {"--app", "hello", "--workers", "1", "--listen", "unix:" + path}, {}, it::Listen::AsGiven});
    CHECK(host.connect().request("GET", "/").status == 200);
    const std::set<std::string> names = names_in_proc();
    CHECK(names.count(path) == 0);
    CHECK(std::any_of(names.begin(), names.end(), [&](const std::string& n) {
      return n.starts_with(shared.file(".app.sock-")) && n.ends_with("/s");
    }));
  }

  TEST_CASE("the master's Unix status socket is owner-only") {
    HostProcess host({.args = {"--app", "hello", "--workers", "1", "--socket-mode", "0666"},
                      .files = {},
                      .listen = it::Listen::UnixSocket,
                      .wait_ready = true,
                      .status_socket = true});
    struct stat st {};
    const std::string status = host.dir().file("status.sock");
    REQUIRE(it::wait_for([&] { return ::stat(status.c_str(), &st) == 0; }, Millis{5000}));
    CHECK((st.st_mode & 0777) == 0600);
    REQUIRE(::stat(host.address().substr(5).c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) == 0666);
  }
}
