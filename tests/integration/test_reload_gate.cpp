// Reloads that cannot make things worse: --ready-path (a worker serves once its handler answered
// the path 2xx) and --reload-grace (a reloaded generation that keeps crashing is undone).
#include "checks.hpp"
#include "support/time.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <csignal>
#include <string>

namespace {

using it::HostOptions;
using it::HostProcess;
using it::Millis;

constexpr Millis kGateWait{10000};

HostOptions with_config(const std::string& conf) {
  HostOptions o;
  o.args = {"--config", "{dir}/host.conf"};
  o.files = {{"host.conf", conf}};
  return o;
}

} // namespace

TEST_SUITE("reload gate") {

  TEST_CASE("--ready-path answered non-2xx at a start: a boot failure, one line, exit 1") {
    HostOptions o;
    o.args = {"--app", "echo", "--workers", "2", "--ready-path", "/not-found"};
    o.expect_log = {"failed to boot: ready-path /not-found answered 404"};
    it::RunResult r = it::run_host(o, kGateWait);
    INFO(r.output);
    CHECK(r.status == 1);
    CHECK(it::lines_with(r.output, "ready-path /not-found answered 404").size() == 1);
  }

  TEST_CASE("a reload whose new generation fails its ready path keeps the old one serving") {
    HostProcess host(with_config("app = echo\nworkers = 2\nready-path = /ready\n"));
    std::vector<pid_t> before = host.wait_workers(2);
    REQUIRE(before.size() == 2);
    host.dir().write("host.conf", "app = echo\nworkers = 2\nready-path = /not-found\n");
    host.allow_log("failed to boot: ready-path /not-found answered 404");
    host.signal(SIGHUP);
    REQUIRE(host.wait_log("ready-path /not-found answered 404.*abandoning generation 2, keeping "
                          "generation 1",
                          kGateWait));
    fcgi_test::Client c = host.connect();
    CHECK(c.request("GET", "/after").status == 200);
    CHECK(host.wait_workers(2) == before); // the same processes serve
  }

  TEST_CASE("--reload-grace: a reloaded generation that crashes 3 times is undone") {
    // The generations told apart by their size: 1 worker before the reload, 2 after.
    HostProcess host(with_config("app = echo\nworkers = 1\n"));
    REQUIRE(host.wait_workers(1).size() == 1);
    host.dir().write("host.conf", "app = echo\nworkers = 2\nreload-grace = 30\n");
    host.allow_log("killed by signal 6");
    host.allow_log("is undone \\(reload-grace\\)");
    host.signal(SIGHUP);
    REQUIRE(host.wait_log("generation 2 ready", kGateWait));
    REQUIRE(host.wait_workers(2).size() == 2);
    // The new generation breaks under traffic (echo's /crash aborts): the third crash undoes it.
    // (Crash lines are at most one a second: each crash is seen as its worker's replacement.)
    for (int crash = 0; crash < 3; ++crash) {
      std::vector<pid_t> before = host.wait_workers(2);
      REQUIRE(before.size() == 2);
      try {
        host.connect().request("GET", "/crash");
      } catch (const fcgi_test::Error&) {}
      INFO("host log:\n" << host.log());
      REQUIRE(it::wait_for([&] { return host.worker_pids() != before; }, kGateWait));
      if (crash == 2) break; // the third undoes the generation: it is not respawned as such
    }
    INFO("host log:\n" << host.log());
    REQUIRE(host.wait_log("3 crashes since the reload: generation 2 is undone \\(reload-grace\\); "
                          "generation 3 runs generation 1's configuration again",
                          kGateWait));
    REQUIRE(host.wait_log("generation 3 ready", kGateWait));
    CHECK(host.wait_workers(1).size() == 1); // generation 1's size again
    CHECK(host.connect().request("GET", "/fine").status == 200);
  }
}
