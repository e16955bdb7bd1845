// Process tests of the master: supervision, stops, reloads, resizing (tests/process/
// master_harness.hpp runs the master in a child with tiny lambda workers).
#include "master_harness.hpp"
#include "process_manager/clock.hpp"
#include "process_manager/exit_codes.hpp"

#include <algorithm>
#include <csignal>
#include <doctest/doctest.h>
#include <filesystem>
#include <fstream>
#include <unistd.h>

using namespace process_manager;
using namespace pm_test;
using namespace std::chrono_literals;

namespace {

std::filesystem::path temp_path(const char* name) {
  return std::filesystem::temp_directory_path() /
         (std::string("pm-test-") + std::to_string(getpid()) + "-" + name);
}

} // namespace

TEST_CASE("master: a worker killed with SIGKILL is replaced within 1 s") {
  MasterUnderTest m(generation(2, well_behaved));
  REQUIRE(m.wait_until([&] { return m.ready().size() == 2; }, 3s));
  pid_t victim = m.ready()[0];
  REQUIRE(kill(victim, SIGKILL) == 0);
  CHECK(m.wait_until(
      [&] {
        auto pids = m.ready();
        return pids.size() == 2 && std::find(pids.begin(), pids.end(), victim) == pids.end();
      },
      1s));
  m.signal(SIGTERM);
  CHECK(m.wait_exit(3s) == exit_code::kOk);
}

TEST_CASE("master: a slot whose workers crash at once backs off alone, a killed healthy worker "
          "in another slot is replaced at once") {
  // Slot 0 crashes right after it was ready, in a loop (a death before ready would be a boot
  // failure, test_pm_boot_deaths.cpp); slot 1 serves.
  MasterUnderTest m(generation(2, [](const WorkerContext& ctx) {
    if (ctx.slot_index != 0) return serve(ctx);
    probe().boots++;
    ctx.slot.state = WorkerState::Idle;
    return 1; // a crash: exit code 1
  }));
  std::uint64_t start = monotonic_ns();
  REQUIRE(m.wait_until([&] { return m.probe().boots >= 4; }, 3s));
  std::uint64_t fourth_boot_ms = (monotonic_ns() - start) / 1'000'000;
  REQUIRE(m.wait_until([&] { return m.ready().size() == 1; }, 3s));
  pid_t healthy = m.ready().front();
  // Its backoff (0, 100, 200 ms ...) slowed slot 0 down: not hundreds of boots.
  CHECK(fourth_boot_ms >= 250);
  std::uint64_t killed = monotonic_ns();
  REQUIRE(kill(healthy, SIGKILL) == 0);
  CHECK(m.wait_until(
      [&] {
        auto now = m.ready();
        return now.size() == 1 && now.front() != healthy;
      },
      1s));
  MESSAGE("slot 0 crash loop: 4th boot after " << fourth_boot_ms
                                               << " ms; slot 1's killed worker replaced in "
                                               << (monotonic_ns() - killed) / 1'000'000 << " ms");
  m.signal(SIGTERM);
  CHECK(m.wait_exit(3s) == exit_code::kOk);
}

TEST_CASE("master: TERM lets the request in flight finish, then exits 0") {
  static std::filesystem::path marker;
  marker = temp_path("marker");
  std::filesystem::remove(marker);
  MasterUnderTest m(generation(1, [](const WorkerContext& ctx) {
    install_worker_handlers();
    ctx.slot.state = WorkerState::Handling;
    probe().in_job = 1;
    test_wait::hold_for(1s); // the job: it takes 1 s, undisturbed by SIGTERM
    std::ofstream(marker) << "done\n";
    ctx.slot.state = WorkerState::Idle;
    wait_for_stop_signal(); // came during the job
    return exit_code::kWorkerDone;
  }));
  REQUIRE(m.wait_until([&] { return m.probe().in_job == 1; }, 3s));
  std::uint64_t sent = monotonic_ns();
  m.signal(SIGTERM);
  CHECK(m.wait_exit(4s) == exit_code::kOk);
  CHECK(monotonic_ns() - sent > 500'000'000); // it waited for the job
  CHECK(std::filesystem::exists(marker));
  std::filesystem::remove(marker);
}

TEST_CASE("master: workers die within 1 s of the master being killed") {
  MasterUnderTest m(generation(2, well_behaved));
  REQUIRE(m.wait_until([&] { return m.ready().size() == 2; }, 3s));
  std::vector<pid_t> workers = m.ready();
  m.signal(SIGKILL);
  CHECK(m.wait_exit(1s) == 128 + SIGKILL);
  CHECK(m.wait_until(
      [&] {
        return std::none_of(workers.begin(), workers.end(),
                            [](pid_t w) { return test_wait::process_running(w); });
      },
      1s));
}

TEST_CASE("master: a worker that fails to boot stops the master with code 1, no loop") {
  MasterUnderTest m(generation(2, [](const WorkerContext&) {
    probe().boots++;
    return exit_code::kWorkerBootFailure;
  }));
  CHECK(m.wait_exit(3s) == exit_code::kFailure);
  CHECK(m.probe().boots <= 2);
}

TEST_CASE("master: HUP starts generation 2, then retires generation 1 without a gap") {
  MasterOptions options;
  options.reload = [] { return std::optional<Generation>(generation(2, well_behaved)); };
  MasterUnderTest m(generation(2, well_behaved), options);
  REQUIRE(m.wait_until([&] { return m.ready(1).size() == 2; }, 3s));
  m.signal(SIGHUP);
  std::size_t fewest = 2;
  bool done = m.wait_until(
      [&] {
        fewest = std::min(fewest, m.ready().size());
        return m.ready(1).empty() && m.ready(2).size() == 2;
      },
      3s);
  CHECK(done);
  CHECK(fewest > 0);
  CHECK(m.wait_until([&] { return m.probe().quits == 2; }, 1s)); // generation 1 got SIGQUIT
  m.signal(SIGTERM);
  CHECK(m.wait_exit(3s) == exit_code::kOk);
}

TEST_CASE("master: a failed reload keeps generation 1") {
  MasterOptions options;
  options.reload = [] { return std::optional<Generation>(); };
  MasterUnderTest m(generation(2, well_behaved), options);
  REQUIRE(m.wait_until([&] { return m.ready(1).size() == 2; }, 3s));
  std::vector<pid_t> before = m.ready(1);
  m.signal(SIGHUP);
  CHECK(m.wait_log("reload failed, keeping generation 1"));
  CHECK(m.wait_master_turn()); // had it started anything, it would be there by now
  CHECK(m.ready() == before);
  CHECK(m.probe().boots == 2);
  m.signal(SIGTERM);
  CHECK(m.wait_exit(3s) == exit_code::kOk);
}

TEST_CASE("master: TTIN and TTOU change the number of workers, never below 1") {
  MasterUnderTest m(generation(2, well_behaved));
  REQUIRE(m.wait_until([&] { return m.ready().size() == 2; }, 3s));
  m.signal(SIGTTIN);
  CHECK(m.wait_until([&] { return m.ready().size() == 3; }, 2s));
  for (std::size_t i = 1; i <= 3; ++i) { // one at a time: pending signals of a kind merge
    m.signal(SIGTTOU);
    CHECK(m.wait_log("TTOU: ", 3s, i));
  }
  CHECK(m.log_count("TTOU: 1 worker\\(s\\), the minimum") == 2); // never below 1
  CHECK(m.wait_until([&] { return m.ready().size() == 1 && m.probe().quits == 2; }, 2s));
  CHECK(m.wait_master_turn());
  CHECK(m.ready().size() == 1);
  CHECK(m.probe().quits == 2); // retired with SIGQUIT
  m.signal(SIGTERM);
  CHECK(m.wait_exit(3s) == exit_code::kOk);
}

TEST_CASE("master: a request past request_timeout gets its worker killed and replaced") {
  Generation g = generation(1, [](const WorkerContext& ctx) {
    if (probe().boots++ == 0) { // the first worker hangs in a request, deaf to signals
      ctx.slot.request(0).request_start_ns = monotonic_ns();
      Scoreboard::set_request(ctx.slot.request(0), "GET", 3, "/stuck", 6);
      ctx.slot.state = WorkerState::Handling;
      sigset_t all;
      sigfillset(&all);
      sigprocmask(SIG_BLOCK, &all, nullptr);
      for (;;)
        pause();
    }
    return serve(ctx);
  });
  g.pool.request_timeout = 300ms;
  MasterUnderTest m(g);
  REQUIRE(m.wait_until([&] { return m.ready().size() == 1; }, 3s));
  pid_t stuck = m.ready()[0];
  CHECK(m.wait_until(
      [&] {
        auto pids = m.ready();
        return m.probe().boots == 2 && pids.size() == 1 && pids[0] != stuck;
      },
      2s));
  CHECK(test_wait::wait_process_exit(stuck, 1s));
  m.signal(SIGTERM);
  CHECK(m.wait_exit(3s) == exit_code::kOk);
}

TEST_CASE("master: USR1 reopens logs in the master and every worker") {
  MasterOptions options;
  options.reopen_logs = [] { probe().reopens++; };
  MasterUnderTest m(generation(2, well_behaved), options);
  REQUIRE(m.wait_until([&] { return m.ready().size() == 2; }, 3s));
  std::vector<pid_t> before = m.ready();
  m.signal(SIGUSR1);
  CHECK(m.wait_until([&] { return m.probe().reopens == 3; }, 1s));
  CHECK(m.wait_master_turn()); // USR2: logged, nothing else
  CHECK(m.ready() == before);
  m.signal(SIGTERM);
  CHECK(m.wait_exit(3s) == exit_code::kOk);
}

TEST_CASE("master: workers still there after graceful_timeout are killed, exit code 0") {
  Generation g = generation(2, deaf);
  g.pool.graceful_timeout = 400ms;
  MasterUnderTest m(g);
  REQUIRE(m.wait_until([&] { return m.ready().size() == 2; }, 3s));
  std::uint64_t sent = monotonic_ns();
  m.signal(SIGTERM);
  CHECK(m.wait_exit(2s) == exit_code::kOk);
  CHECK(monotonic_ns() - sent >= 400'000'000);
}

TEST_CASE("master: INT during a graceful stop escalates to a fast stop") {
  MasterUnderTest m(generation(1, deaf)); // graceful_timeout 3 s
  REQUIRE(m.wait_until([&] { return m.ready().size() == 1; }, 3s));
  m.signal(SIGTERM);
  CHECK(m.wait_log("graceful stop of 1 worker"));
  m.signal(SIGTERM); // nothing new
  std::uint64_t sent = monotonic_ns();
  m.signal(SIGINT);
  CHECK(m.wait_exit(2s) == exit_code::kOk); // SIGKILL 1 s after INT, not 3 s after TERM
  CHECK(monotonic_ns() - sent >= 900'000'000);
}

TEST_CASE("master: a HUP during a reload is queued and done afterwards") {
  MasterOptions options;
  options.reload = [] {
    probe().reloads++;
    return std::optional<Generation>(generation(1, [](const WorkerContext& ctx) {
      // The boot waits for the test: the reload stays in progress while the second HUP comes.
      test_wait::wait_until([] { return probe().boot_gate == 1; }, 3s);
      return serve(ctx);
    }));
  };
  MasterUnderTest m(generation(1, well_behaved), options);
  REQUIRE(m.wait_until([&] { return m.ready(1).size() == 1; }, 3s));
  m.probe().boot_gate = 0;
  m.signal(SIGHUP);
  CHECK(m.wait_log("HUP: starting generation 2"));
  m.signal(SIGHUP);
  CHECK(m.wait_log("next reload queued"));
  m.probe().boot_gate = 1;
  CHECK(m.wait_until([&] { return m.ready(3).size() == 1 && m.ready().size() == 1; }, 3s));
  CHECK(m.probe().reloads == 2);
  m.signal(SIGTERM);
  CHECK(m.wait_exit(3s) == exit_code::kOk);
}

TEST_CASE("master: a new generation not ready within graceful_timeout is abandoned") {
  MasterOptions options;
  options.reload = [] {
    Generation g = generation(1, [](const WorkerContext&) {
      for (;;)
        pause(); // never leaves Starting
      return 0;
    });
    g.pool.graceful_timeout = 300ms;
    return std::optional<Generation>(std::move(g));
  };
  MasterUnderTest m(generation(2, well_behaved), options);
  REQUIRE(m.wait_until([&] { return m.ready(1).size() == 2; }, 3s));
  std::vector<pid_t> before = m.ready(1);
  m.signal(SIGHUP);
  CHECK(m.wait_log("abandoning generation 2, keeping generation 1"));
  // The abandoned worker never leaves Starting: killed 1 s later, and its exit logged.
  CHECK(m.wait_log("\\(abandoned generation\\)", 3s));
  CHECK(m.ready() == before);
  CHECK(m.probe().quits == 0);
  m.signal(SIGTERM);
  CHECK(m.wait_exit(3s) == exit_code::kOk);
}

TEST_CASE("master: a boot failure in a new generation keeps the old one serving") {
  MasterOptions options;
  options.reload = [] {
    return std::optional<Generation>(
        generation(2, [](const WorkerContext&) { return exit_code::kWorkerBootFailure; }));
  };
  MasterUnderTest m(generation(2, well_behaved), options);
  REQUIRE(m.wait_until([&] { return m.ready(1).size() == 2; }, 3s));
  std::vector<pid_t> before = m.ready(1);
  m.signal(SIGHUP);
  CHECK(m.wait_log("exited with code 3 before it was ready \\(boot failure\\); abandoning "
                   "generation 2"));
  CHECK(m.wait_master_turn());
  CHECK(m.ready() == before);
  CHECK(m.wait_exit(0ms) == -1); // still running
  m.signal(SIGTERM);
  CHECK(m.wait_exit(3s) == exit_code::kOk);
}
