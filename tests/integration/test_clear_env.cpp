// --clear-env, on by default as php-fpm's clear_env: a worker (and an --exec program) sees none
// of the master's environment, only what --env passes and the fixed PATH; with it off, it sees
// the master's environment, --env added. The master's environment gets a variable of its own
// for each host started here (ScopedEnv), which no worker may see by default.
#include "checks.hpp"
#include "harness.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <set>
#include <sstream>

using it::HostOptions;
using it::HostProcess;

using it::kSandboxPlugin;

namespace {

const std::string kPath = "PATH=/usr/local/bin:/usr/bin:/bin";
const char* kMasterOnly = "FCGI_HOST_TEST_MASTER_ONLY";

std::set<std::string> lines_of(const std::string& text) {
  std::set<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) lines.insert(line);
  return lines;
}

// A built-in worker's environment, as its handler sees it (the sandbox plugin's /environ).
std::set<std::string> handler_environment(const HostProcess& host) {
  fcgi_test::Response r = host.connect().request("GET", "/environ");
  INFO(r.status << ": " << r.body);
  CHECK(r.status == 200);
  return lines_of(r.body);
}

// The environment the --exec program of a one-worker host was exec'd with: read once it has
// answered a request (before the exec, /proc shows the forked master's).
std::set<std::string> program_environment(HostProcess& host) {
  CHECK(host.connect().request("GET", "/").status == 200);
  std::vector<pid_t> workers = host.wait_workers(1);
  REQUIRE(workers.size() == 1);
  const pid_t pid = workers[0];
  std::string env = it::read_file("/proc/" + std::to_string(pid) + "/environ");
  std::replace(env.begin(), env.end(), '\0', '\n');
  return lines_of(env);
}

std::vector<std::string> with(std::vector<std::string> args, std::vector<std::string> more) {
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

} // namespace

TEST_SUITE("clear-env") {

  TEST_CASE("by default a worker sees only --env and PATH, none of the master's variables") {
    it::ScopedEnv secret(kMasterOnly, "master-secret");
    HostProcess host({"--app", kSandboxPlugin, "--workers", "1", "--env", "PASSED=yes"});
    std::set<std::string> env = handler_environment(host);
    CHECK(env == std::set<std::string>{"PASSED=yes", kPath});
  }

  TEST_CASE("--env PATH replaces the cleared environment's PATH") {
    HostProcess host({"--app", kSandboxPlugin, "--workers", "1", "--env", "PATH=/opt/app/bin"});
    CHECK(handler_environment(host) == std::set<std::string>{"PATH=/opt/app/bin"});
  }

  TEST_CASE("--clear-env off, and clear-env = false in a file: the master's environment too") {
    it::ScopedEnv secret(kMasterOnly, "master-secret");
    const std::string master_only = std::string(kMasterOnly) + "=master-secret";
    {
      HostProcess host(
          {"--app", kSandboxPlugin, "--workers", "1", "--clear-env", "off", "--env", "PASSED=yes"});
      std::set<std::string> env = handler_environment(host);
      CHECK(env.count(master_only) == 1);
      CHECK(env.count("PASSED=yes") == 1);
    }
    HostOptions o;
    o.args = {"--config", "{dir}/host.conf"};
    o.files = {{"host.conf", "app = " + kSandboxPlugin + "\nworkers = 1\nclear-env = false\n"}};
    HostProcess host(o);
    CHECK(handler_environment(host).count(master_only) == 1);
  }

  TEST_CASE("an --exec program: only --env and PATH by default, the master's with it off") {
    it::ScopedEnv secret(kMasterOnly, "master-secret");
    const std::vector<std::string> exec = {"--exec", it::workers_fixture(FCGI_TEST_LIBFCGI_ECHO)};
    {
      HostProcess host(with({"--workers", "1", "--env", "FIXTURE_WHO=cleared"}, exec));
      CHECK(program_environment(host) == std::set<std::string>{"FIXTURE_WHO=cleared", kPath});
    }
    HostProcess host(with({"--workers", "1", "--clear-env=off"}, exec));
    CHECK(program_environment(host).count(std::string(kMasterOnly) + "=master-secret") == 1);
  }
}
