// fcgi-host start-up: bad input refused with a message and the published exit code, --test-config,
// and the config file against the command line.
#include "checks.hpp"
#include "process_manager/exit_codes.hpp"

#include <sys/stat.h>

using fcgi_test::Millis;
using it::HostOptions;
using it::HostProcess;
using it::Listen;

namespace {

bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// The master says how many workers it keeps ("started: generation 1, N worker(s)"), and that many
// run (a single look at the process list alone would pass a pool still growing past n).
void check_worker_count(HostProcess& host, std::size_t n) {
  CHECK(host.wait_log("started: generation 1, " + std::to_string(n) + " worker\\(s\\)"));
  CHECK(host.wait_workers(n).size() == n);
}

} // namespace

TEST_SUITE("host start-up") {

  TEST_CASE("bad start-up input exits non-zero naming the culprit") {
    struct Case {
      const char* what;
      std::vector<std::string> args;
      std::map<std::string, std::string> files;
      int exit_code; // 0: any non-zero code
      std::string word;
    };
    const std::vector<Case> cases = {
        {"--workers 0",
         {"--workers", "0", "--listen", "unix:{dir}/s.sock"},
         {},
         it::kExitUsage,
         "workers"},
        {"--listen nonsense", {"--listen", "nonsense"}, {}, it::kExitUsage, "nonsense"},
        {"unknown option",
         {"--no-such-option", "--listen", "unix:{dir}/s.sock"},
         {},
         it::kExitUsage,
         "no-such-option"},
        {"unreadable config",
         {"--config", "{dir}/missing.conf"},
         {},
         it::kExitUsage,
         "missing.conf"},
        {"bad config line",
         {"--config", "{dir}/host.conf"},
         {{"host.conf", "workers = 2\nthis line has no equals sign\n"}},
         it::kExitUsage,
         "host.conf:2"},
        {"--app /nonexistent.so",
         {"--app", "/nonexistent.so", "--listen", "unix:{dir}/s.sock"},
         {},
         0,
         "/nonexistent.so"},
    };
    for (const Case& c : cases) {
      CAPTURE(c.what);
      it::RunResult r = it::run_host(HostOptions{c.args, c.files, Listen::AsGiven});
      INFO("output:\n" << r.output);
      CHECK(r.status != -1); // it exited at all (within 10 s)
      CHECK(r.status != 0);
      if (c.exit_code) CHECK(r.status == c.exit_code);
      CHECK(r.output.find(c.word) != std::string::npos);
    }
  }

  TEST_CASE("a Unix socket path held by a live server is refused, and left alone") {
    HostProcess first({"--app", "hello", "--workers", "1"});
    std::string path = first.address().substr(5); // after "unix:"
    it::RunResult r = it::run_host(
        HostOptions{{"--app", "hello", "--listen", first.address()}, {}, Listen::AsGiven});
    INFO("output:\n" << r.output);
    CHECK(r.status == it::kExitStartupFailure);
    CHECK(r.output.find(path) != std::string::npos);
    // The refused host must not have unlinked the live server's socket.
    CHECK(first.connect().request("GET", "/").body == "OK");
    it::check_no_alerts(first);
  }

  TEST_CASE("--test-config accepts a good config without serving, refuses a bad one") {
    SUBCASE("good") {
      it::RunResult r = it::run_host(
          HostOptions{{"--test-config", "--config", "{dir}/host.conf"},
                      {{"host.conf", "listen = unix:{dir}/t.sock\nworkers = 2\napp = hello\n"}},
                      Listen::AsGiven});
      INFO("output:\n" << r.output);
      CHECK(r.status == 0);
      CHECK(r.output.find("[alert]") == std::string::npos);
    }
    SUBCASE("good, and nothing bound") {
      HostProcess host(HostOptions{{"--test-config", "--config", "{dir}/host.conf"},
                                   {{"host.conf", "listen = unix:{dir}/t.sock\napp = hello\n"}},
                                   Listen::AsGiven,
                                   false});
      CHECK(host.wait_exit(Millis{10000}).value_or(-1) == 0);
      CHECK_FALSE(file_exists(host.dir().file("t.sock")));
    }
    SUBCASE("bad value") {
      it::RunResult r =
          it::run_host(HostOptions{{"--test-config", "--config", "{dir}/host.conf"},
                                   {{"host.conf", "listen = unix:{dir}/t.sock\nworkers = 0\n"}},
                                   Listen::AsGiven});
      INFO("output:\n" << r.output);
      CHECK(r.status == it::kExitUsage);
      CHECK(r.output.find("workers") != std::string::npos);
    }
    SUBCASE("bad line") {
      it::RunResult r =
          it::run_host(HostOptions{{"--test-config", "--config", "{dir}/host.conf"},
                                   {{"host.conf", "app = hello\n\nnot an option line\n"}},
                                   Listen::AsGiven});
      INFO("output:\n" << r.output);
      CHECK(r.status == it::kExitUsage);
      CHECK(r.output.find("host.conf:3") != std::string::npos);
    }
  }

  TEST_CASE("config file values are used, and the command line wins") {
    const std::map<std::string, std::string> conf = {{"host.conf", "workers = 3\napp = echo\n"}};
    SUBCASE("from the file") {
      HostProcess host(HostOptions{{"--config", "{dir}/host.conf"}, conf});
      check_worker_count(host, 3);
      CHECK(host.connect().request("GET", "/x").body.find("method=GET\n") != std::string::npos);
      it::check_no_alerts(host);
    }
    SUBCASE("command line over the file") {
      HostProcess host(
          HostOptions{{"--config", "{dir}/host.conf", "--workers", "1", "--app", "hello"}, conf});
      check_worker_count(host, 1);
      CHECK(host.connect().request("GET", "/x").body == "OK");
      it::check_no_alerts(host);
    }
  }

  TEST_CASE("--help and --version exit 0") {
    it::RunResult help = it::run_host(HostOptions{{"--help"}, {}, Listen::AsGiven});
    CHECK(help.status == 0);
    CHECK(help.output.find("--listen") != std::string::npos);
    it::RunResult version = it::run_host(HostOptions{{"--version"}, {}, Listen::AsGiven});
    CHECK(version.status == 0);
    CHECK_FALSE(version.output.empty());
  }

  TEST_CASE("each subcommand's --help prints its usage once and exits 0") {
    for (const char* command : {"status", "ping", "replay", "reload", "scale"}) {
      CAPTURE(command);
      it::RunResult help = it::run_host(HostOptions{{command, "--help"}, {}, Listen::AsGiven});
      INFO(help.output);
      CHECK(help.status == 0);
      const std::string usage = std::string("Usage: fcgi-host ") + command;
      const std::size_t first = help.output.find(usage);
      CHECK(first != std::string::npos);
      CHECK(help.output.find(usage, first + 1) == std::string::npos);
    }
    // The replay block once: its description is not printed twice either.
    it::RunResult replay = it::run_host(HostOptions{{"replay", "--help"}, {}, Listen::AsGiven});
    const std::size_t once = replay.output.find("--set-param NAME=VALUE  ");
    CHECK(once != std::string::npos);
    CHECK(replay.output.find("in this one", once) == std::string::npos);
    CHECK(replay.output.find("fcgi-host replay FILE") ==
          replay.output.rfind("fcgi-host replay FILE"));
  }

} // TEST_SUITE
