// --mold on (process_manager/mold.hpp, runners/mold_boot.hpp) with the real binary: the plugin's
// mold hook runs once per generation however many workers there are (once in each worker
// without the mold), and every worker serves what it built; the workers are the master's
// children; kill -9 of the mold leaves the workers serving and a new mold comes back, which forks
// the next worker; a reload makes a new mold and the old one leaves with its generation; a hook
// that throws fails the start, or the reload (the old generation serving on), with one line; and
// the master (strace of the master alone, at start and at HUP) never opens the plugin's path
// with the mold, where it does without it; the mold, reading the file with the workers' rights,
// refuses a FIFO, a link to a root-only file and a huge sparse file with one line each. The
// fixture: tests/fixtures/mold_plugin.cpp.
#include "harness.hpp"
#include "support/files.hpp"
#include "support/skip.hpp"

#include <doctest/doctest.h>

#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <map>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace {

using it::HostOptions;
using it::HostProcess;
using it::Millis;

constexpr Millis kMoldWait{15000};
constexpr const char* kHookLine = "mold hook ran in ";

// A host serving the fixture with `workers` workers, the mold on or off. The mold reads the
// plugin with the workers' rights: the fixture's copy their user can reach.
HostOptions mold_plugin_host(bool mold, int workers = 3, std::vector<std::string> more = {}) {
  HostOptions o;
  o.args = {"--app",       it::workers_fixture(FCGI_TEST_MOLD_PLUGIN),
            "--workers",   std::to_string(workers),
            "--mold",      mold ? "on" : "off",
            "--log-level", "info"};
  o.args.insert(o.args.end(), more.begin(), more.end());
  return o;
}

std::size_t mold_hook_runs(const HostProcess& host) {
  return it::lines_with(host.log(), kHookLine).size();
}

// What one request answers ("pid 123 words 524288 sum ..."), or the error.
std::string mold_table_answer(const HostProcess& host) {
  try {
    return host.connect().request("GET", "/").body;
  } catch (const std::exception& e) {
    return std::string("error: ") + e.what();
  }
}

// Every one of a few requests is answered from the whole table (4 MiB: 524288 words).
bool serves_the_table(const HostProcess& host) {
  for (int i = 0; i < 6; ++i)
    if (!it::has(mold_table_answer(host), "words 524288 sum ")) return false;
  return true;
}

} // namespace

TEST_SUITE("mold") {
  TEST_CASE("the mold hook runs once for every worker with --mold on, once in each worker "
            "without") {
    for (bool mold : {true, false}) {
      CAPTURE(mold);
      HostOptions o = mold_plugin_host(mold);
      o.status_socket = true;
      HostProcess host(o);
      REQUIRE(host.wait_workers(3).size() == 3);
      REQUIRE(host.wait_log("generation 1 ready", kMoldWait));
      CHECK(serves_the_table(host));
      CHECK(mold_hook_runs(host) == (mold ? 1u : 3u));
      const std::vector<pid_t> molds = host.mold_pids();
      CHECK(molds.size() == (mold ? 1u : 0u));
      // The status page shows the mold (null without one), its PSS in the pool's.
      const std::string json = host.status_json();
      CHECK(it::json_number(json, "mold pid") == (mold && !molds.empty() ? molds[0] : -1));
      CHECK(it::json_number(json, "mold generation") == (mold ? 1 : -1));
      if (mold) {
        CHECK(it::json_number(json, "mold pss bytes") > 0);
        CHECK(it::json_number(json, "mold uptime s") >= 0);
        CHECK(it::json_number(json, "pss processes") == 5); // the master, 3 workers, the mold
      }
      if (mold && !molds.empty()) // the hook ran in the mold, not in a worker
        CHECK(it::has(host.log(), kHookLine + std::to_string(molds[0])));
    }
  }

  TEST_CASE(
      "kill -9 of the mold leaves its workers serving, and a new mold forks the next worker") {
    HostOptions o = mold_plugin_host(true);
    o.status_socket = true;
    HostProcess host(o);
    const std::vector<pid_t> workers = host.wait_workers(3);
    REQUIRE(workers.size() == 3);
    REQUIRE(host.wait_log("generation 1 ready", kMoldWait));
    const std::vector<pid_t> molds = host.mold_pids();
    REQUIRE(molds.size() == 1);
    REQUIRE(::kill(molds[0], SIGKILL) == 0);
    CHECK(host.wait_log("mold " + std::to_string(molds[0]) +
                        R"( \(gen 1\) was killed by signal 9.*its workers keep serving)"));
    CHECK(host.wait_log(R"(mold \d+ \(gen 1\) ready)", kMoldWait, 2));
    CHECK(serves_the_table(host));
    const std::vector<pid_t> back = host.mold_pids();
    REQUIRE(back.size() == 1);
    CHECK(!host.wait_status("mold pid", back[0]).empty()); // the status page names the new one
    CHECK(host.wait_workers(3) == workers);                // none of them was replaced
    host.signal(SIGTTIN);
    const std::vector<pid_t> grown = host.wait_workers(4, kMoldWait);
    REQUIRE(grown.size() == 4);
    CHECK(host.wait_log(R"(worker \d+ \(gen 1, slot 3\) spawned)"));
    // The new mold ran the hook once more; the fourth worker did not.
    CHECK(mold_hook_runs(host) == 2);
    const std::vector<pid_t> now = host.mold_pids();
    REQUIRE(now.size() == 1);
    CHECK(now[0] != molds[0]);
  }

  TEST_CASE("with --threads 4, the mold's workers serve on handler threads, the hook run once") {
    HostProcess host(mold_plugin_host(true, 2, {"--threads", "4"}));
    REQUIRE(host.wait_log("generation 1 ready", kMoldWait));
    CHECK(serves_the_table(host));
    CHECK(mold_hook_runs(host) == 1);
    CHECK(host.worker_pids().size() == 2);
  }

  TEST_CASE("a reload makes a new mold, and the old one leaves with its generation") {
    HostProcess host(mold_plugin_host(true, 2));
    REQUIRE(host.wait_log("generation 1 ready", kMoldWait));
    const std::vector<pid_t> first = host.mold_pids();
    REQUIRE(first.size() == 1);
    host.signal(SIGHUP);
    REQUIRE(host.wait_log("generation 2 ready", kMoldWait));
    CHECK(host.wait_log("mold " + std::to_string(first[0]) +
                        R"( \(gen 1\) leaves with its generation)"));
    CHECK(it::wait_for([&] { return !it::process_alive(first[0]); }, kMoldWait));
    const std::vector<pid_t> second = host.mold_pids();
    REQUIRE(second.size() == 1);
    CHECK(second[0] != first[0]);
    CHECK(host.wait_log(R"(mold \d+ \(gen 2\) ready)"));
    CHECK(host.wait_workers(2).size() == 2);
    CHECK(serves_the_table(host));
    CHECK(mold_hook_runs(host) == 2);
  }

  TEST_CASE("with --private-tmp and --sandbox, the mold copies a plugin under the machine's "
            "/tmp and its workers serve in the sandbox") {
    if (::geteuid() != 0) return test_support::skip("--private-tmp needs root");
    HostProcess host(
        mold_plugin_host(true, 2, {"--private-tmp", "on", "--sandbox", "best-effort"}));
    REQUIRE(host.wait_log("generation 1 ready", kMoldWait));
    CHECK(serves_the_table(host));
    CHECK(mold_hook_runs(host) == 1);
    CHECK(host.mold_pids().size() == 1);
  }

  TEST_CASE("--mold is per pool: a pool with it has a mold, the one beside it none") {
    HostOptions o;
    o.args = {"--config", "{dir}/main.conf"};
    o.listen = it::Listen::AsGiven;
    o.wait_ready = false;
    o.files = {
        {"main.conf",
         "workers = 2\nlog-level = info\n" +
             it::pool_section("molded", "app = " + it::workers_fixture(FCGI_TEST_MOLD_PLUGIN) +
                                            "\nmold = on\n") +
             it::pool_section("plain", "app = echo\n")}};
    HostProcess host(o);
    REQUIRE_MESSAGE(host.wait_log(R"(\[molded\].*generation 1 ready)", kMoldWait), host.log());
    REQUIRE(host.wait_log(R"(\[plain\].*generation 1 ready)", kMoldWait));
    std::map<std::string, pid_t> masters; // the pools' masters, by the --pool NAME they run
    for (pid_t child : it::child_pids(host.pid())) {
      const std::string cmdline = it::read_file("/proc/" + std::to_string(child) + "/cmdline");
      for (const char* pool : {"molded", "plain"})
        if (it::has(cmdline, std::string("--pool") + '\0' + pool + '\0')) masters[pool] = child;
    }
    REQUIRE(masters.size() == 2);
    auto molds_under = [](pid_t master) {
      std::size_t n = 0;
      for (pid_t child : it::child_pids(master))
        n += it::read_file("/proc/" + std::to_string(child) + "/comm") == "fcgi-host mold\n";
      return n;
    };
    CHECK(molds_under(masters["molded"]) == 1);
    CHECK(molds_under(masters["plain"]) == 0);
    CHECK(mold_hook_runs(host) == 1);
    auto client = fcgi_test::Client::connect("unix:" + host.dir().file("molded.sock"));
    CHECK(it::has(client.request("GET", "/").body, "words 524288 sum "));
  }

  TEST_CASE("--mold on with --exec is refused with one line") {
    HostOptions o;
    o.args = {"--mold", "on", "--exec", "/bin/cat"};
    it::RunResult r = it::run_host(o, kMoldWait);
    CHECK(r.status == 2);
    CHECK_MESSAGE(it::lines_with(r.output, "--mold: not available with --exec").size() == 1,
                  r.output);
  }

  TEST_CASE("the master answers its status socket while the mold boots, and the workers come "
            "once it is ready") {
    test_support::TempDir dir("mold-hold");
    ::chmod(dir.path().c_str(), 0755); // the mold (nobody) opens the FIFO in it
    const std::string fifo = dir.file("hold");
    REQUIRE(::mkfifo(fifo.c_str(), 0666) == 0);
    ::chmod(fifo.c_str(), 0666);
    HostOptions o = mold_plugin_host(true, 2, {"--env", "FCGI_TEST_MOLD_HOLD=" + fifo});
    o.status_socket = true;
    HostProcess host(o);
    // The hook waits in the FIFO's open: the mold boots, the master's loop goes on.
    const std::string booting = host.wait_status(
        [](const std::string& json) { return it::json_number(json, "mold pid") > 0; });
    REQUIRE(!booting.empty());
    CHECK(it::json_number(booting, "idle processes") == 0);
    CHECK(host.wait_master_turn());
    CHECK(host.worker_pids().empty());
    int writer = -1; // opened once the hook is in its open (ENXIO before: no reader yet)
    CHECK(it::wait_for(
        [&] { return (writer = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC)) >= 0; },
        kMoldWait));
    if (writer >= 0) ::close(writer);
    CHECK(host.wait_log("generation 1 ready", kMoldWait));
    CHECK(host.wait_workers(2).size() == 2);
    CHECK(serves_the_table(host));
  }

  TEST_CASE("a mold hook that throws fails the start with one line") {
    HostOptions o = mold_plugin_host(true, 2, {"--env", "FCGI_TEST_MOLD_THROW=test"});
    it::RunResult r = it::run_host(o, kMoldWait);
    CHECK(r.status == 1);
    const auto lines = it::lines_with(r.output, "could not boot");
    REQUIRE(lines.size() == 1);
    CHECK(it::has(lines[0], "the mold of generation 1 could not boot: the mold hook of"));
    CHECK(it::has(lines[0], "the table's source is missing (test)"));
    CHECK(it::has(lines[0], "the master exits with code 1"));
    CHECK(it::lines_with(r.output, "spawned").empty()); // no worker was forked
  }

  TEST_CASE("a reload whose mold cannot boot keeps the old generation serving") {
    HostOptions o = mold_plugin_host(true, 2, {"--config", "{dir}/host.conf"});
    o.files["host.conf"] = "env = FCGI_TEST_MOLD_SEEN=1\n";
    HostProcess host(o);
    REQUIRE(host.wait_log("generation 1 ready", kMoldWait));
    const std::vector<pid_t> workers = host.wait_workers(2);
    const std::vector<pid_t> molds = host.mold_pids();
    REQUIRE(molds.size() == 1);
    host.dir().write("host.conf", "env = FCGI_TEST_MOLD_THROW=reload\n");
    host.signal(SIGHUP);
    REQUIRE(host.wait_log("abandoning generation 2, keeping generation 1", kMoldWait));
    const auto lines = it::lines_with(host.log(), "could not boot");
    REQUIRE(lines.size() == 1);
    CHECK(it::has(lines[0], "the mold of generation 2 could not boot: the mold hook of"));
    CHECK(serves_the_table(host));
    CHECK(host.wait_workers(2) == workers);
    CHECK(host.mold_pids() == molds); // generation 1's mold stays with it
  }

  TEST_CASE("with --mold on, a FIFO, a link to a root-only file and a 300 MB sparse file at "
            "the plugin path each fail the start with one line") {
    if (::geteuid() != 0) return test_support::skip("needs root (workers of another user)");
    test_support::TempDir dir("mold-source");
    ::chmod(dir.path().c_str(), 0755); // the mold (nobody) reaches what is in it
    const std::string fifo = dir.file("fifo.so");
    REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
    const std::string big = dir.write("big.so", "");
    REQUIRE(::truncate(big.c_str(), off_t{300} << 20) == 0);
    const std::string secret = dir.write("secret", "root only\n");
    REQUIRE(::chmod(secret.c_str(), 0600) == 0);
    const std::string link = dir.file("link.so");
    REQUIRE(::symlink(secret.c_str(), link.c_str()) == 0);
    const std::vector<std::pair<std::string, std::string>> cases = {
        {fifo, "not a regular file"}, {big, "larger than 256 MiB"}, {link, "Permission denied"}};
    for (const auto& [path, why] : cases) {
      CAPTURE(path);
      HostOptions o;
      o.args = {"--app", path, "--mold", "on", "--workers", "2"};
      it::RunResult r = it::run_host(o, kMoldWait);
      CHECK(r.status == 1);
      const auto lines = it::lines_with(r.output, "could not boot");
      REQUIRE_MESSAGE(lines.size() == 1, r.output);
      CHECK(it::has(lines[0], why));
      CHECK(!it::has(r.output, "root only")); // nothing of the file was shown
    }
  }

  TEST_CASE("the master never opens the plugin's path with --mold on (strace of the master "
            "alone, at start and at HUP)") {
    const std::string strace = "/usr/bin/strace";
    if (!std::filesystem::exists(strace))
      return test_support::skip("strace is not installed (scripts/test.sh installs it)");
    for (bool mold : {true, false}) {
      CAPTURE(mold);
      test_support::TempDir traces("mold-strace");
      const std::string trace = traces.file("master.trace");
      HostOptions o = mold_plugin_host(mold, 2);
      // Without -f: the master's own calls, not its children's. LeakSanitizer cannot run under
      // ptrace: the master's leak check at exit is off here.
      const char* asan = std::getenv("ASAN_OPTIONS");
      o.wrapper = {"/usr/bin/env",
                   std::string("ASAN_OPTIONS=") + (asan ? std::string(asan) + ":" : "") +
                       "detect_leaks=0",
                   strace,
                   "-o",
                   trace,
                   "-e",
                   "trace=open,openat,openat2"};
      HostProcess host(o);
      REQUIRE(host.wait_log("generation 1 ready", kMoldWait));
      const std::vector<pid_t> masters = it::child_pids(host.pid()); // strace's one child
      REQUIRE(masters.size() == 1);
      REQUIRE(::kill(masters[0], SIGHUP) == 0);
      REQUIRE(host.wait_log("generation 2 ready", kMoldWait));
      CHECK(serves_the_table(host));
      const std::string calls = it::read_file(trace);
      REQUIRE(it::has(calls, "openat(")); // the trace holds the master's opens
      const std::size_t plugin_opens = it::lines_with(calls, "libmold_plugin.so").size();
      if (mold)
        CHECK(plugin_opens == 0);
      else
        CHECK(plugin_opens >= 2); // the master's copy, at start and at the reload
    }
  }
}
