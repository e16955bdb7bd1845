// The master trusts no worker (docs/security.md, "Trust boundary"): a worker can write its whole
// scoreboard slot, so what the master acts on as root comes from its own worker table (the pid it
// forked), and what it takes from the slot is checked against it. Here a worker names another
// process as its crashed thread: the master's debugger must not attach to it.
#include "master_harness.hpp"
#include "process_manager/clock.hpp"
#include "process_manager/crash_report.hpp"
#include "process_manager/exit_codes.hpp"
#include "process_manager/stack_trace.hpp"

#include <csignal>
#include <doctest/doctest.h>
#include <sched.h>
#include <unistd.h>

using namespace process_manager;
using namespace pm_test;
using namespace std::chrono_literals;

namespace {

pid_t g_victim = 0; // set before the master forks: the process the worker names

// Plays the crash handler's part (crash_report.cpp) with a lie: the first worker reports a crash
// of "its thread" g_victim, waits for the master to take the stack, then dies of SIGSEGV.
int lying_crash(const WorkerContext& ctx) {
  if (probe().boots++ != 0) return serve(ctx);
  ctx.slot.state = WorkerState::Idle; // ready: a crash now is a crash, not a boot failure
  ctx.slot.request(0).request_start_ns = monotonic_ns();
  ctx.slot.state = WorkerState::Handling;
  ctx.slot.crash_signal = SIGSEGV;
  ctx.slot.crash_tid = g_victim;
  ctx.slot.crash_ns = monotonic_ns();
  ctx.slot.crash_state.store(CrashState::Waiting, std::memory_order_release);
  ::kill(getppid(), SIGCHLD);
  const std::uint64_t deadline = monotonic_ns() + 10'000'000'000ULL;
  while (crash_waiting(ctx.slot) && monotonic_ns() < deadline)
    ::sched_yield(); // the master reads the slot, takes the stack, then marks it done
  ::signal(SIGSEGV, SIG_DFL);
  ::raise(SIGSEGV);
  return 0;
}

} // namespace

TEST_CASE("master: a thread id a worker writes into its slot is checked: another process is never "
          "traced") {
  CHECK(is_thread_of(getpid(), getpid()));
  CHECK(is_thread_of(getpid(), static_cast<pid_t>(gettid())));
  CHECK_FALSE(is_thread_of(getpid(), 1));
  CHECK_FALSE(is_thread_of(getpid(), 0));

  g_victim = getpid(); // this test process: its frames (doctest's) must not show up
  MasterUnderTest m(generation(1, lying_crash));
  REQUIRE(m.wait_log("killed by signal 11", 10s));
  CHECK_MESSAGE(
      m.wait_log("the slot named thread " + std::to_string(g_victim) + ", not one of worker"),
      m.log());
  CHECK_FALSE(m.log().find("doctest") != std::string::npos);
  REQUIRE(m.wait_until([&] { return m.ready().size() == 1 && m.probe().boots >= 2; }, 5s));
  CHECK(m.stop() == exit_code::kOk);
}
