// A config that --test-config calls valid starts; one it refuses is refused by a real start with
// the same exit code (2) and message, naming the option and FILE:LINE when it came from the file.
#include "checks.hpp"

#include <algorithm>

using fcgi_test::Millis;
using it::HostOptions;
using it::Listen;

namespace {

struct BrokenConfig {
  const char* what;
  std::string file;              // host.conf, "{dir}" replaced; may be empty
  std::vector<std::string> args; // after --config (when there is a file)
  std::string message;           // in the output of both runs
};

// Each file line names a problem start would otherwise find only after parsing.
const std::vector<BrokenConfig> kBroken = {
    {"unknown user", "user = nosuchuser\n", {}, "host.conf:1: user: unknown user \"nosuchuser\""},
    {"unknown group", "\ngroup = nosuchgroup\n", {}, "host.conf:2: group: unknown group"},
    {"unknown socket owner", "socket-owner = nosuchuser\n", {}, "host.conf:1: socket-owner"},
    {"unknown socket group", "socket-group = nosuchgroup\n", {}, "host.conf:1: socket-group"},
    {"missing chdir", "chdir = /nonexistent\n", {}, "host.conf:1: chdir: \"/nonexistent\""},
    {"exec program missing",
     "exec = /nonexistent/bin\n",
     {},
     "host.conf:1: exec: \"/nonexistent/bin\""},
    {"app misspelt", "app = helo\n", {}, "host.conf:1: app: unknown app \"helo\""},
    {"plugin missing", "app = /nonexistent/lib.so\n", {}, "host.conf:1: app: "},
    {"access-format token", "access-format = %a %z\n", {}, "host.conf:1: access-format"},
    {"listen does not resolve", "", {"--listen", "1.2.3.4.5:80"}, "--listen: cannot resolve"},
    {"config is a directory", "", {"--config", "/etc"}, "\"/etc\" is a directory"},
    {"env repeated, one bad", "env = A=1\nenv = =2\n", {}, "host.conf:2: env: '=2'"},
    {"TCP status listener without an allow-list",
     "status-listen = 127.0.0.1:9\n",
     {},
     "host.conf:1: status-listen: a TCP status listener needs --status-allow"},
    {"TCP health port without an allow-list",
     "health-listen = 127.0.0.1:9\n",
     {},
     "host.conf:1: health-listen: a TCP health port needs --health-allow"},
    {"health port before the first section of a pools file",
     "health-listen = unix:{dir}/health.sock\n[a]\napp = echo\n",
     {},
     "host.conf:1: health-listen: before the first section; give each pool its own"},
    {"ready-max-queue-time not a number",
     "ready-max-queue-time = soon\n",
     {},
     "host.conf:1: ready-max-queue-time"},
    {"unix socket in a directory that does not exist",
     "app = echo\n",
     {"--listen", "unix:{dir}/missing/x.sock"},
     "--listen: the socket's directory \""},
    {"unix socket path is a regular file",
     "app = echo\n",
     {"--listen", "unix:{dir}/host.conf"},
     "host.conf\" exists and is not a socket"},
    {"status socket in a directory that does not exist",
     "status-listen = unix:{dir}/missing/status.sock\n",
     {},
     "host.conf:1: status-listen: the socket's directory"},
    {"the pools' status socket in a directory that does not exist",
     "status-listen = unix:{dir}/missing/status.sock\n[a]\napp = echo\n",
     {},
     "host.conf:1: status-listen: the socket's directory"},
    {"error log in a directory that does not exist",
     "error-log = {dir}/missing/error.log\n",
     {},
     "host.conf:1: error-log: cannot create"},
    {"pidfile in a directory that does not exist",
     "pidfile = {dir}/missing/x.pid\n",
     {},
     "host.conf:1: pidfile: cannot create"},
    {"access log in a directory that does not exist",
     "access-log = {dir}/missing/access.log\n",
     {},
     "host.conf:1: access-log: cannot create"},
    {"capture directory missing",
     "capture-crashes = {dir}/missing\n",
     {},
     "host.conf:1: capture-crashes"},
    {"rlimit-files above what the kernel allows",
     "rlimit-files = 1073741824\n",
     {},
     "host.conf:1: rlimit-files: above fs.nr_open"},
    {"chdir is a file",
     "chdir = /etc/hostname\n",
     {},
     "host.conf:1: chdir: \"/etc/hostname\" is not a directory"},
    {"status path with --exec",
     "status-path = /status\nexec = /bin/true\n",
     {},
     "host.conf:1: status-path: not available with --exec"},
};

it::RunResult run(const BrokenConfig& c, bool test_config) {
  std::vector<std::string> args;
  if (test_config) args.push_back("--test-config");
  if (!c.file.empty()) args.insert(args.end(), {"--config", "{dir}/host.conf"});
  args.insert(args.end(), c.args.begin(), c.args.end());
  bool has_listen = std::find(c.args.begin(), c.args.end(), "--listen") != c.args.end();
  if (!has_listen) args.insert(args.end(), {"--listen", "unix:{dir}/t.sock"});
  std::map<std::string, std::string> files;
  if (!c.file.empty()) files["host.conf"] = c.file;
  return it::run_host(HostOptions{args, files, Listen::AsGiven});
}

} // namespace

TEST_SUITE("config checks") {

  TEST_CASE("each broken config: --test-config and a real start both exit 2 with the message") {
    for (const BrokenConfig& c : kBroken) {
      CAPTURE(c.what);
      for (bool test_config : {true, false}) {
        CAPTURE(test_config);
        it::RunResult r = run(c, test_config);
        INFO("output:\n" << r.output);
        CHECK(r.status == it::kExitUsage);
        CHECK(r.output.find(c.message) != std::string::npos);
        CHECK(r.output.find("is valid") == std::string::npos);
      }
    }
  }

  TEST_CASE("a server on the socket: --test-config says so and passes, a start is refused") {
    it::HostProcess running({"--app", "hello", "--workers", "1"});
    const std::string listen = running.address();
    it::RunResult checked =
        it::run_host(HostOptions{{"--test-config", "--listen", listen}, {}, Listen::AsGiven});
    INFO(checked.output);
    CHECK(checked.status == 0);
    CHECK(checked.output.find("note: --listen: a server listens on") != std::string::npos);
    CHECK(checked.output.find("is valid") != std::string::npos);
    it::RunResult started =
        it::run_host(HostOptions{{"--listen", listen, "--app", "hello"}, {}, Listen::AsGiven});
    INFO(started.output);
    CHECK(started.status == 3);
    CHECK(started.output.find("another server is listening") != std::string::npos);
  }

  TEST_CASE("a program's own options after --exec PROGRAM pass --test-config") {
    it::RunResult r = it::run_host(HostOptions{
        {"--test-config", "--listen", "unix:{dir}/t.sock", "--exec", "/bin/sh", "-c", "exit 0"},
        {},
        Listen::AsGiven});
    INFO("output:\n" << r.output);
    CHECK(r.status == 0);
    CHECK(r.output.find("is valid") != std::string::npos);
  }
}

TEST_SUITE("config checks") {

  TEST_CASE("--exec: the start line names the program and its arguments") {
    const std::string program = it::workers_fixture(FCGI_TEST_LIBFCGI_ECHO);
    it::HostProcess host({"--workers", "1", "--exec", program, "--", "-x", "--listen"});
    REQUIRE(it::wait_for([&] { return host.log().find("listening on") != std::string::npos; },
                         Millis{5000}));
    std::string line = it::lines_with(host.log(), "listening on").front();
    INFO(line);
    CHECK(line.find("exec " + program + " -x --listen") != std::string::npos);
    CHECK(line.find("app hello") == std::string::npos);
    it::check_no_alerts(host);
  }
}
