// Comments after values in a config file, as php-fpm's users write them (config_file.hpp): every
// kind of value (path, number, size, list, switch, include, section header) means what is before
// the comment, in --test-config and in a real start; a value in double quotes keeps a ` #`; the
// example of docs/pools.md works as it is written there.
#include "commands.hpp"
#include "harness.hpp"

#include <doctest/doctest.h>

#include <dirent.h>
#include <fstream>
#include <sstream>

namespace {

using it::HostOptions;
using it::HostProcess;
using it::Millis;

constexpr Millis kCommentWait{10000};

bool accepts(const std::string& path) {
  try {
    ::close(fcgi_test::connect_socket(path, Millis{200}));
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

std::vector<std::string> names_in(const std::string& dir) {
  std::vector<std::string> names;
  if (DIR* d = ::opendir(dir.c_str())) {
    while (const dirent* e = ::readdir(d))
      names.emplace_back(e->d_name);
    ::closedir(d);
  }
  return names;
}

// A worker's environment, one "NAME=value" a line.
std::string environment_of(pid_t pid) {
  std::string env = it::read_file("/proc/" + std::to_string(pid) + "/environ");
  std::replace(env.begin(), env.end(), '\0', '\n');
  return env;
}

const char* kOneApp = "# one application, a comment after every value\n"
                      "; a comment line of the other kind\n"
                      "listen = unix:{dir}/x.sock        # the socket\n"
                      "pidfile = {dir}/x.pid             ; where the pid goes\n"
                      "error-log = {dir}/error.log\t# a tab before the comment\n"
                      "workers = 2                       # a number\n"
                      "max-body = 1K                     # a size\n"
                      "allow-clients = 127.0.0.1, ::1    # a list\n"
                      "clear-env = false                 # a switch\n"
                      "env = GREETING=hello              # a repeated option\n"
                      "app = echo                        # a built-in app\n"
                      "status-path = /status             # a path in the URL space\n";

} // namespace

TEST_SUITE("config comments") {

  TEST_CASE("comments after every kind of value: --test-config accepts the file") {
    it::RunResult r = it::run_host({{"--config", "{dir}/host.conf", "--test-config"},
                                    {{"host.conf", kOneApp}},
                                    it::Listen::AsGiven,
                                    false},
                                   kCommentWait);
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(r.output.find("is valid") != std::string::npos);
  }

  TEST_CASE("comments after every kind of value: a real start takes only what is before them") {
    HostProcess host(HostOptions{
        {"--config", "{dir}/host.conf"}, {{"host.conf", kOneApp}}, it::Listen::AsGiven, false});
    const std::string dir = host.dir().path();
    REQUIRE_MESSAGE(it::wait_for([&] { return accepts(dir + "/x.sock"); }, kCommentWait),
                    host.log());
    // The paths: the pidfile and the error log have their names, nothing more.
    CHECK(it::wait_for([&] { return !it::read_file(dir + "/x.pid").empty(); }, kCommentWait));
    CHECK(std::stol(it::read_file(dir + "/x.pid")) == host.pid());
    for (const std::string& name : names_in(dir)) {
      CAPTURE(name);
      CHECK(name.find('#') == std::string::npos);
      CHECK(name.find(';') == std::string::npos);
    }
    CHECK(it::wait_for([&] { return !it::read_file(dir + "/error.log").empty(); }, kCommentWait));
    // The number: two workers.
    std::vector<pid_t> workers = host.wait_workers(2, kCommentWait);
    REQUIRE(workers.size() == 2);
    // The size: a body over 1K is refused, one under it is served.
    fcgi_test::Client small = fcgi_test::Client::connect(dir + "/x.sock");
    CHECK(small.request("POST", "/", std::string(1000, 'b')).status == 200);
    fcgi_test::Client big = fcgi_test::Client::connect(dir + "/x.sock");
    CHECK(big.request("POST", "/", std::string(2000, 'b')).status == 413);
    // The URL path: the status page is at /status.
    fcgi_test::Client status = fcgi_test::Client::connect(dir + "/x.sock");
    fcgi_test::Response page = status.request("GET", "/status");
    CHECK(page.status == 200);
    CHECK(page.body.find("idle processes") != std::string::npos);
    host.allow_log("client errors|too large|max-body");
  }

  TEST_CASE("exec and env with comments: the program and each value are what is before them") {
    const std::string file =
        std::string("listen = unix:{dir}/x.sock\n"
                    "workers = 1\n"
                    "exec = ") +
        it::workers_fixture(FCGI_TEST_LIBFCGI_ECHO) +
        "        # a program, split at spaces\n"
        "env = GREETING=hello              # a repeated option\n"
        "env = \"TAG=a #1\"                  # quoted: the ` #1` is the value's\n"
        "env = URL=http://x/#top;y         # no space before: part of the value\n";
    it::RunResult checked = it::run_host({{"--config", "{dir}/host.conf", "--test-config"},
                                          {{"host.conf", file}},
                                          it::Listen::AsGiven,
                                          false},
                                         kCommentWait);
    INFO(checked.output);
    CHECK(checked.status == 0);
    HostProcess host(HostOptions{
        {"--config", "{dir}/host.conf"}, {{"host.conf", file}}, it::Listen::AsGiven, false});
    const std::string dir = host.dir().path();
    REQUIRE_MESSAGE(it::wait_for([&] { return accepts(dir + "/x.sock"); }, kCommentWait),
                    host.log());
    fcgi_test::Client c = fcgi_test::Client::connect(dir + "/x.sock");
    CHECK(c.request("GET", "/?q=1").body.find("query=q=1") != std::string::npos);
    std::vector<pid_t> workers = host.wait_workers(1, kCommentWait);
    REQUIRE(workers.size() == 1);
    // The program's environment as it was exec'd: each value once, the quoted one with its ` #1`,
    // the unspaced `#` and `;` kept.
    const std::string env = "\n" + environment_of(workers[0]);
    INFO(env);
    CHECK(env.find("\nGREETING=hello\n") != std::string::npos);
    CHECK(env.find("\nTAG=a #1\n") != std::string::npos);
    CHECK(env.find("\nURL=http://x/#top;y\n") != std::string::npos);
  }

  TEST_CASE("pools: comments after globals, an include and a section header") {
    const std::map<std::string, std::string> files = {
        {"main.conf", "pidfile = {dir}/pools.pid      # global: before the first section\n"
                      "max-workers-total = 4          ; all pools together\n"
                      "workers = 1                    # a default for every pool\n"
                      "include = pools.d/*.conf       # relative to this file\n"},
        {"pools.d/a.conf", "[a]   # the first pool\n"
                           "listen = unix:{dir}/a.sock   # its own socket\n"
                           "app = echo                   ; its app\n"}};
    it::RunResult checked = it::run_host(
        {{"--config", "{dir}/main.conf", "--test-config"}, files, it::Listen::AsGiven, false},
        kCommentWait);
    INFO(checked.output);
    CHECK(checked.status == 0);

    HostProcess host(
        HostOptions{{"--config", "{dir}/main.conf"}, files, it::Listen::AsGiven, false});
    const std::string dir = host.dir().path();
    REQUIRE_MESSAGE(it::wait_for([&] { return accepts(dir + "/a.sock"); }, kCommentWait),
                    host.log());
    CHECK(it::wait_for([&] { return !it::read_file(dir + "/pools.pid").empty(); }, kCommentWait));
    for (const std::string& name : names_in(dir)) {
      CAPTURE(name);
      CHECK(name.find('#') == std::string::npos);
    }
    fcgi_test::Client c = fcgi_test::Client::connect(dir + "/a.sock");
    CHECK(c.request("GET", "/").status == 200);
  }

  TEST_CASE(
      "a value's double quote that does not close, or text after it: refused with file:line") {
    struct Case {
      const char* file;
      const char* message;
    };
    for (const Case& k :
         std::vector<Case>{{"app = echo\nenv = \"A=1 # x\n",
                            "host.conf:2: the value's double quote is not closed"},
                           {"app = echo\nenv = \"A=1\" B=2\n",
                            "host.conf:2: text after the value's closing double quote"}}) {
      for (bool test_config : {true, false}) {
        CAPTURE(k.file);
        CAPTURE(test_config);
        std::vector<std::string> args = {"--config", "{dir}/host.conf", "--listen",
                                         "unix:{dir}/t.sock"};
        if (test_config) args.push_back("--test-config");
        it::RunResult r =
            it::run_host({args, {{"host.conf", k.file}}, it::Listen::AsGiven, false}, kCommentWait);
        INFO(r.output);
        CHECK(r.status == 2);
        CHECK(r.output.find(k.message) != std::string::npos);
      }
    }
  }

  TEST_CASE("the example of docs/pools.md, as written there, passes --test-config") {
    // The ```ini block that opens the page: one file per "# /etc/fcgi-host/NAME" line. Only what
    // this machine lacks is put in its place: the directories, a user and the plugin of the
    // example; every comment stays where the page has it.
    std::ifstream page(std::string(FCGI_HOST_SOURCE_DIR) + "/docs/pools.md");
    REQUIRE(page);
    std::map<std::string, std::string> files;
    std::string current, line;
    bool in_block = false;
    while (std::getline(page, line)) {
      if (!in_block) {
        in_block = line == "```ini";
        continue;
      }
      if (line == "```") break;
      if (line.starts_with("# /etc/fcgi-host/")) {
        current = line.substr(17);
        continue;
      }
      for (const auto& [from, to] :
           std::vector<std::pair<std::string, std::string>>{{"/run/fcgi-host/", "{dir}/"},
                                                            {"/var/log/fcgi-host/", "{dir}/"},
                                                            {"user = api", "user = nobody"},
                                                            {"/usr/lib/myapi/libapi.so", "hello"},
                                                            {"/usr/bin/php-cgi", "/bin/cat"}})
        if (auto at = line.find(from); at != std::string::npos) line.replace(at, from.size(), to);
      if (!current.empty()) files[current] += line + "\n";
    }
    REQUIRE(files.count("fcgi-host.conf") == 1);
    REQUIRE(files.size() == 4);
    CHECK(files["fcgi-host.conf"].find("  # ") != std::string::npos); // the comments are there
    it::RunResult r = it::run_host(
        {{"--config", "{dir}/fcgi-host.conf", "--test-config"}, files, it::Listen::AsGiven, false},
        kCommentWait);
    INFO(r.output);
    CHECK(r.status == 0);
  }
}
