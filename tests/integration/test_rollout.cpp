// --rollout canary under steady load through nginx: a reload's new build serves one worker of
// six beside the old build for a short window, and is judged on its own figures. A build that
// answers 500 to every third request, or 30 ms slower, is undone (and the old build answers
// everything after); a good one is promoted without a failed request. The build is the
// fixture's FCGI_TEST_BUILD, set by `env =` in the config file, so that each generation keeps
// its own (tests/fixtures/rollout_plugin.cpp).
#include "commands.hpp"
#include "harness.hpp"
#include "lifecycle_load.hpp"
#include "request_modes.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <csignal>
#include <string>

namespace {

using it::HostOptions;
using it::HostProcess;
using it::Millis;
using RolloutClock = std::chrono::steady_clock;

constexpr int kRolloutWorkers = 6;
// More clients than workers, each request 3 ms in the handler: every worker is busy, so the
// canary serves about its share (1/6) of the requests.
constexpr int kRolloutClients = 8;
constexpr Millis kVerdictWait{40000}; // a 4 s window, extended at most 3 times, and the boot

// The host's config: six workers, a canary of one watched for 4 s, serving `build`; with
// `mold`, every generation's workers forked by its mold.
std::string rollout_conf(const HostProcess* host, const std::string& build, unsigned threads,
                         bool mold = false) {
  // The mold reads the plugin with the workers' rights: the fixture's copy their user reaches.
  const std::string plugin = mold   ? it::workers_fixture(FCGI_TEST_ROLLOUT_PLUGIN)
                             : host ? host->dir().file("librollout.so")
                                    : "{dir}/librollout.so";
  return "app = " + plugin + "\nworkers = " + std::to_string(kRolloutWorkers) +
         "\nthreads = " + std::to_string(threads) +
         "\nrollout = canary\ncanary-workers = 1\nrollout-window = 4\nrollout-step = 2\n"
         "graceful-timeout = 10\nmold = " +
         (mold ? "on" : "off") + "\nenv = FCGI_TEST_BUILD=" + build + "\n";
}

HostOptions rollout_host(unsigned threads, bool mold = false) {
  HostOptions o;
  o.args = {"--config", "{dir}/host.conf", "--pidfile", "{dir}/host.pid"};
  o.files = {{"host.conf", rollout_conf(nullptr, "good", threads, mold)},
             {"librollout.so", it::read_file(FCGI_TEST_ROLLOUT_PLUGIN)}};
  o.status_socket = true;
  return o;
}

// `fcgi-host reload --wait` against the host's status socket: its exit status and output.
it::Command reload_and_wait(const HostProcess& host) {
  return it::run_shell(HostProcess::binary() + " reload --wait --timeout 60 --connect unix:" +
                       host.dir().file("status.sock"));
}

// Every one of `n` answers through nginx is 200 with `body`.
bool all_answers_are(int port, const std::string& body, int n) {
  for (int i = 0; i < n; ++i) {
    it::HttpResponse r = it::http_request(port, "GET", "/after");
    if (r.status != 200 || r.body != body) return false;
  }
  return true;
}

// The failed requests of a load that started at or after `from`.
std::size_t failures_since(const it::HttpLoad& load, RolloutClock::time_point from) {
  const auto& s = load.samples();
  return static_cast<std::size_t>(std::count_if(s.begin(), s.end(), [&](const auto& x) {
    return x.start >= from && (x.status < 200 || x.status > 299);
  }));
}

// A reload to `build` under load, undone: the figures, the exit status of reload --wait, and
// nothing but the old build afterwards.
void check_bad_build_undone(const std::string& build, const std::string& figures,
                            bool mold = false) {
  const unsigned threads = it::request_path_threads();
  HostProcess host(rollout_host(threads, mold));
  REQUIRE_MESSAGE(host.wait_workers(kRolloutWorkers).size() == kRolloutWorkers, host.log());
  it::NginxProcess nginx({host.address()});
  it::HttpLoad load(nginx.port(), "/", kRolloutClients);
  REQUIRE(load.wait_more(100));

  host.dir().write("host.conf", rollout_conf(&host, build, threads, mold));
  host.allow_log("rollout of generation 2 undone");
  const auto window_from = RolloutClock::now();
  const std::size_t before = load.completed();
  it::Command wait = reload_and_wait(host); // HUP, then the verdict
  INFO(wait.output);
  CHECK(wait.status == 1);
  CHECK(wait.output.find("undone") != std::string::npos);
  REQUIRE(host.wait_log("rollout of generation 2 undone: " + figures, kVerdictWait));
  // The canary's exit line: after it, only the old build answers.
  REQUIRE(host.wait_log("\\(gen 2, slot [0-9]+\\) .* requests", kVerdictWait));
  const std::size_t in_window = load.completed() - before;
  const auto after_from = RolloutClock::now();
  CHECK(load.wait_more(300));
  load.stop();

  const std::size_t failed = failures_since(load, window_from) - failures_since(load, after_from);
  // One worker of six, a third of its answers 500: about 1/18 of the window's requests fail.
  MESSAGE(build << " (--threads " << threads << std::string(mold ? ", --mold on" : "")
                << "): " << failed << " failed of " << in_window
                << " requests during the rollout (one canary of " << kRolloutWorkers
                << " workers: 1/" << kRolloutWorkers << " of the traffic)");
  INFO("first error: " << load.first_error() << "\nnginx: " << nginx.error_log());
  CHECK(failures_since(load, after_from) == 0);
  CHECK(failed <= in_window / 6); // at most about three times the canary's share × 1/3
  CHECK(all_answers_are(nginx.port(), "good\n", 30));
  CHECK(host.wait_workers(kRolloutWorkers).size() == kRolloutWorkers);
  std::string status = host.status_json();
  CHECK(it::json_number(status, "rollout state") == 5); // undone
}

// A reload to a good build under load: promoted a step at a time, not one request failed.
void check_good_build_promoted(bool mold) {
  HostProcess host(rollout_host(1, mold));
  REQUIRE(host.wait_workers(kRolloutWorkers).size() == kRolloutWorkers);
  it::NginxProcess nginx({host.address()});
  it::HttpLoad load(nginx.port(), "/", kRolloutClients);
  REQUIRE(load.wait_more(100));

  host.dir().write("host.conf", rollout_conf(&host, "good-v2", 1, mold));
  it::Command wait = reload_and_wait(host);
  INFO(wait.output);
  CHECK(wait.status == 0);
  CHECK(wait.output.find("promoted") != std::string::npos);
  REQUIRE(host.wait_log("rollout of generation 2 promoted: 5xx 0.0% against 0.0%, p99 .* "
                        "replacing the old workers 2 at a time",
                        kVerdictWait));
  REQUIRE(host.wait_log("generation 2 serves all 6 worker\\(s\\); rollout complete", kVerdictWait));
  CHECK(load.wait_more(200));
  load.stop();
  INFO("first error: " << load.first_error() << "\nnginx: " << nginx.error_log());
  MESSAGE("good build: " << load.failures() << " failed of " << load.samples().size()
                         << " requests across the rollout");
  CHECK(load.failures() == 0);
  CHECK(all_answers_are(nginx.port(), "good-v2\n", 30));
  CHECK(it::json_number(host.status_json(), "rollout state") == 4); // promoted
}

} // namespace

TEST_SUITE("rollout") {

  TEST_CASE("--rollout canary in pools: the pool that changed rolls alone, the other reloads not") {
    // No traffic: the window (0.5 s) is extended 3 times, then the 5xx shares (none) promote.
    auto conf = [](const std::string& env) {
      return "workers = 2\n[a]\nlisten = unix:{dir}/a.sock\napp = echo\nrollout = canary\n"
             "rollout-window = 0.5\nenv = " +
             env + "\n[b]\nlisten = unix:{dir}/b.sock\napp = echo\n";
    };
    HostOptions o;
    o.args = {"--config", "{dir}/main.conf"};
    o.files = {{"main.conf", conf("V=1")}};
    o.listen = it::Listen::AsGiven;
    o.wait_ready = false;
    HostProcess host(o);
    REQUIRE(host.wait_log("\\[a\\]: master [0-9]+ started", Millis{10000}));
    REQUIRE(host.wait_log("\\[b\\]: master [0-9]+ started", Millis{10000}));
    std::string changed = conf("V=2");
    changed.replace(changed.find("{dir}"), 5, host.dir().path());
    changed.replace(changed.find("{dir}"), 5, host.dir().path());
    host.dir().write("main.conf", changed);
    host.signal(SIGHUP);
    CHECK(host.wait_log("\\[a\\]: rollout of generation 2: 1 canary worker beside generation 1",
                        Millis{10000}));
    CHECK(host.wait_log("\\[a\\]: rollout of generation 2 promoted: .* too few, judged on errors",
                        Millis{15000}));
    CHECK(host.wait_log("\\[a\\]: generation 2 serves all 2 worker\\(s\\); rollout complete",
                        Millis{10000}));
    CHECK(it::lines_with(host.log(), "[b]: rollout").empty());
    CHECK(it::lines_with(host.log(), "[b]: HUP").empty());
  }

  TEST_CASE("--rollout canary: TERM while the canary is watched drains both generations") {
    HostProcess host(rollout_host(1));
    REQUIRE(host.wait_workers(kRolloutWorkers).size() == kRolloutWorkers);
    host.dir().write("host.conf", rollout_conf(&host, "fail-third", 1));
    host.signal(SIGHUP);
    REQUIRE(!host.wait_status("rollout state", 2, Millis{10000}).empty()); // watching
    host.signal(SIGTERM);
    CHECK(host.wait_log("rollout of generation 2 ends with the stop: both generations drain"));
    CHECK(host.wait_exit(Millis{15000}).value_or(-1) == 0);
    CHECK(it::lines_with(host.log(), "(gen 1, slot").size() >= kRolloutWorkers);
    CHECK(it::lines_with(host.log(), "(gen 2, slot").size() >= 1);
  }

  TEST_CASE("--rollout canary: USR2 while the canary is watched keeps the old generation") {
    HostProcess host(rollout_host(1));
    const std::string pidfile = host.dir().file("host.pid");
    REQUIRE(it::wait_for([&] { return it::read_pid(pidfile) == host.pid(); }, Millis{5000}));
    REQUIRE(host.wait_workers(kRolloutWorkers).size() == kRolloutWorkers);
    host.dir().write("host.conf", rollout_conf(&host, "fail-third", 1));
    host.signal(SIGHUP);
    REQUIRE(!host.wait_status("rollout state", 2, Millis{10000}).empty()); // watching
    host.allow_log("rollout of generation 2 undone");
    host.signal(SIGUSR2);
    CHECK(host.wait_log("rollout of generation 2 undone: a binary upgrade \\(USR2\\) came during "
                        "it; generation 1 serves every worker again"));
    // The upgrade goes on from the old generation: the old master hands over and exits 0.
    CHECK(host.wait_exit(Millis{15000}).value_or(-1) == 0);
    const pid_t new_master = it::read_pid(pidfile);
    CHECK(new_master != host.pid());
    if (new_master > 0 && it::process_alive(new_master)) ::kill(new_master, SIGTERM);
    CHECK(test_wait::wait_process_exit(new_master, Millis{10000}));
  }

  REQUEST_PATH_CASE("--rollout canary: a build answering 500 to every third request is undone") {
    check_bad_build_undone("fail-third", "5xx [0-9.]+% against 0.0% over [0-9]+ requests");
  }

  TEST_CASE("--rollout canary: a build 30 ms slower is undone on its p99") {
    it::request_path_threads() = 1;
    check_bad_build_undone("slow30", "p99 [0-9.]+ ms against [0-9.]+ ms over [0-9]+ requests");
  }

  TEST_CASE("--rollout canary: a good build is promoted a step at a time, 0 failed requests") {
    check_good_build_promoted(false);
  }

  TEST_CASE("--rollout canary with --mold on: a bad build is undone, a good one promoted") {
    it::request_path_threads() = 1;
    check_bad_build_undone("fail-third", "5xx [0-9.]+% against 0.0% over [0-9]+ requests", true);
    check_good_build_promoted(true);
  }
}
