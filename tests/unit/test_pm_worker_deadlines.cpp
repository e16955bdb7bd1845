// Timeouts and nudges: when a worker gets which signal (process_manager/worker_deadlines.hpp).
#include "process_manager/worker_deadlines.hpp"
#include "support/nanoseconds.hpp"

#include "process_manager/clock.hpp"
#include "process_manager/signals.hpp"

#include <doctest/doctest.h>

using namespace process_manager;
using namespace std::chrono_literals;

namespace {
using test_support::kMs;
using test_support::kS;
using test_support::kT0;

Child worker() {
  Child w;
  w.pid = 42;
  w.graceful_timeout = 30s;
  w.retire_signal = SIGQUIT;
  return w;
}

SlotSnapshot in_handler(std::uint64_t started, std::uint32_t connections = 1) {
  return SlotSnapshot{WorkerState::Handling, started, connections, false};
}
} // namespace

TEST_CASE("deadlines: a retire sends the generation's retire signal, SIGKILL after the timeout") {
  Child w = worker();
  w.retire_signal = SIGTERM; // an --exec program's
  Escalation e = stop_escalation(w, StopReason::Retire);
  CHECK(e.signal == SIGTERM);
  StopFollowUp f = stop_follow_up(w, StopReason::Retire, e, SlotSnapshot{}, kT0);
  CHECK(f.kill_at_ns == kT0 + 30 * kS);
  CHECK_FALSE(f.nudge);
  CHECK(f.resend_at_ns == 0);
  CHECK(stop_escalation(w, StopReason::Graceful).signal == signals::kWorkerGracefulStop);
}

TEST_CASE("deadlines: a later stop never moves a planned SIGKILL later, an earlier one sooner") {
  Child w = worker();
  w.kill_at_ns = kT0 + 5 * kS; // a graceful stop already planned it
  Escalation fast = stop_escalation(w, StopReason::Fast);
  CHECK(stop_follow_up(w, StopReason::Fast, fast, SlotSnapshot{}, kT0).kill_at_ns ==
        kT0 + ns(kFastStopGrace));
  Escalation retire = stop_escalation(w, StopReason::Retire);
  CHECK(stop_follow_up(w, StopReason::Retire, retire, SlotSnapshot{}, kT0).kill_at_ns ==
        kT0 + 5 * kS);
}

TEST_CASE("deadlines: a retired worker in a slow request beside kept connections is nudged") {
  Child w = worker();
  w.nudge_after = 100ms;
  Escalation e = stop_escalation(w, StopReason::Retire);
  CHECK(stop_follow_up(w, StopReason::Retire, e, in_handler(kT0, 3), kT0).nudge);
  CHECK_FALSE(stop_follow_up(w, StopReason::Retire, e, in_handler(kT0, 1), kT0).nudge);
  CHECK_FALSE(stop_follow_up(w, StopReason::Retire, e, SlotSnapshot{}, kT0).nudge);
  Escalation g = stop_escalation(w, StopReason::Graceful);
  CHECK_FALSE(stop_follow_up(w, StopReason::Graceful, g, in_handler(kT0, 3), kT0).nudge);
}

TEST_CASE("deadlines: --exec programs get their stop signal again, a SIGKILL needs nothing more") {
  Child w = worker();
  w.resend_stop_every = 500ms;
  Escalation e = stop_escalation(w, StopReason::Retire);
  StopFollowUp f = stop_follow_up(w, StopReason::Retire, e, SlotSnapshot{}, kT0);
  CHECK(f.resend_at_ns == kT0 + 500 * kMs);
  w.resend_at_ns = f.resend_at_ns;
  CHECK_FALSE(resend_due(w, kT0 + 499 * kMs));
  CHECK(resend_due(w, kT0 + 500 * kMs));
  Escalation timeout = stop_escalation(w, StopReason::Timeout);
  CHECK(timeout.signal == SIGKILL);
  StopFollowUp none = stop_follow_up(w, StopReason::Timeout, timeout, in_handler(kT0, 3), kT0);
  CHECK(none.kill_at_ns == 0);
  CHECK(none.resend_at_ns == 0);
  w.mark_signalled(SIGKILL);
  CHECK_FALSE(resend_due(w, kT0 + kS));
}

TEST_CASE("deadlines: SIGKILL is due at the stop deadline, once") {
  Child w = worker();
  CHECK_FALSE(kill_due(w, kT0)); // none planned
  w.kill_at_ns = kT0;
  CHECK_FALSE(kill_due(w, kT0 - 1));
  CHECK(kill_due(w, kT0));
  w.mark_signalled(SIGKILL);
  CHECK_FALSE(kill_due(w, kT0 + kS));
}

TEST_CASE("deadlines: a request past request_timeout in the handler is timed out") {
  Child w = worker();
  CHECK_FALSE(request_timed_out(w, in_handler(kT0), kT0 + 3600 * kS)); // off
  w.request_timeout = 2s;
  CHECK_FALSE(request_timed_out(w, in_handler(kT0), kT0 + 2 * kS)); // exactly: not yet
  CHECK(request_timed_out(w, in_handler(kT0), kT0 + 2 * kS + 1));
  CHECK(running_ns(in_handler(kT0), kT0 + 3 * kS) == 3 * kS);
  SlotSnapshot reading{WorkerState::Reading, kT0, 1, false}; // a slow client, not a slow handler
  CHECK_FALSE(request_timed_out(w, reading, kT0 + 3 * kS));
  CHECK_FALSE(request_timed_out(w, in_handler(kT0 + 10 * kS), kT0)); // stamped after now
  CHECK(running_ns(in_handler(kT0 + 10 * kS), kT0) == 0);
}

TEST_CASE("deadlines: a nudge once per request, only beside other connections") {
  Child w = worker();
  w.nudge_after = 100ms;
  CHECK_FALSE(nudge_due(w, in_handler(kT0, 2), kT0 + 100 * kMs));
  CHECK(nudge_due(w, in_handler(kT0, 2), kT0 + 101 * kMs));
  CHECK_FALSE(nudge_due(w, in_handler(kT0, 1), kT0 + kS));
  w.nudged_request_ns = kT0; // this request had its nudge
  CHECK_FALSE(nudge_due(w, in_handler(kT0, 2), kT0 + kS));
  CHECK(nudge_due(w, in_handler(kT0 + kS, 2), kT0 + 2 * kS)); // the next request
}

TEST_CASE("deadlines: a slow request gets one stack, a crashed worker is not slow") {
  Child w = worker();
  w.slow_stack_after = 1s;
  CHECK(slow_stack_due(w, in_handler(kT0), kT0 + 2 * kS));
  SlotSnapshot crashed = in_handler(kT0);
  crashed.crashed = true;
  CHECK_FALSE(slow_stack_due(w, crashed, kT0 + 2 * kS));
  w.slow_stack_request_ns = kT0;
  CHECK_FALSE(slow_stack_due(w, in_handler(kT0), kT0 + 3 * kS));
}

TEST_CASE("deadlines: at most ten slow-request stacks a minute, the refused ones counted") {
  SlowStackBudget b;
  for (unsigned i = 0; i < kSlowStacksPerMinute; ++i)
    CHECK(b.take(kT0 + i * kS));
  CHECK_FALSE(b.take(kT0 + 20 * kS));
  CHECK_FALSE(b.take(kT0 + 30 * kS));
  CHECK(b.take_refused() == 2);
  CHECK(b.take_refused() == 0);
  CHECK(b.take(kT0 + 60 * kS)); // a new minute
}

TEST_CASE("deadlines: the loop ticks faster only while a nudge may be due, and wakes when it "
          "comes due") {
  Child w = worker();
  SlotSnapshot between{WorkerState::KeepAliveIdle, 0, 5, false};
  CHECK_FALSE(nudge_tick(w, between, kT0)); // no --handoff-after
  w.nudge_after = 100ms;
  CHECK_FALSE(nudge_tick(w, in_handler(kT0, 1), kT0 + 10 * kMs)); // nothing to pass on
  between.connections = 2;
  CHECK(nudge_tick(w, between, kT0) == 100ms); // a request may begin now
  CHECK(nudge_tick(w, in_handler(kT0, 2), kT0 + 30 * kMs) == 70ms);
  CHECK(nudge_tick(w, in_handler(kT0, 2), kT0 + 30 * kMs + 1) == 70ms); // not before it is due
  CHECK(nudge_tick(w, in_handler(kT0, 2), kT0 + 150 * kMs) == 1ms);     // due: the next turn
  w.nudged_request_ns = kT0;
  CHECK(nudge_tick(w, in_handler(kT0, 2), kT0 + 150 * kMs) == 100ms); // nudged: the next one's
  w.nudge_after = 1ms;
  CHECK(nudge_tick(w, between, kT0) == 1ms);
  w.nudge_after = 10s;
  CHECK(nudge_tick(w, between, kT0) == kTick);
}

TEST_CASE("deadlines: a due nudge goes at once to a sleeping thread, to a runnable one only once "
          "it ran more than it waited for a CPU") {
  Child w = worker();
  ThreadSched asleep = parse_thread_sched("42 (fcgi-host: w (1)) S 1 2 3", "5000000 100 7\n");
  REQUIRE(asleep.known);
  CHECK_FALSE(asleep.runnable);
  CHECK(asleep.run_ns == 5000000);
  CHECK(asleep.wait_ns == 100);
  CHECK(nudge_now(w, kT0, asleep)); // a handler waiting on something

  // Kept off the CPU: it waited 3 ms for 0.1 ms run; looked again: waited again.
  CHECK_FALSE(nudge_now(w, kT0, parse_thread_sched("42 (w) R 1", "1000000 2000000 9")));
  CHECK_FALSE(nudge_now(w, kT0, parse_thread_sched("42 (w) R 1", "1100000 5000000 10")));
  // A new request starts the looks over; one that computes goes at the second look.
  CHECK_FALSE(nudge_now(w, kT0 + kMs, parse_thread_sched("42 (w) R 1", "1200000 5000000 10")));
  CHECK(nudge_now(w, kT0 + kMs, parse_thread_sched("42 (w) R 1", "3200000 5100000 11")));
  // Unknown (the files unreadable): as before, at once.
  CHECK(nudge_now(w, kT0 + 2 * kMs, parse_thread_sched("garbage", "")));
  CHECK_FALSE(parse_thread_sched("42 (w) R", "x y").known);
}
