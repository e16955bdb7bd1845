#include "process_manager/master_impl.hpp"

#include "process_manager/clock.hpp"
#include "process_manager/crash_report.hpp"
#include "process_manager/log.hpp"
#include "process_manager/signals.hpp"
#include "process_manager/stack_trace.hpp"
#include "process_manager/uri_redaction.hpp"

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>

namespace process_manager {

void Master::Impl::stop(Child& w, StopReason reason) {
  Escalation e = stop_escalation(w, reason, scoreboard.slot(w.slot).thread_count());
  w.stop_reason = reason;
  send(w, e.signal);
  if (e.signal == SIGKILL) return;
  StopFollowUp next =
      stop_follow_up(w, reason, e, SlotSnapshot::of(scoreboard.slot(w.slot)), monotonic_ns());
  if (next.nudge) ::kill(w.pid, signals::nudge_signal());
  if (next.resend_at_ns != 0) {
    w.stop_signal = e.signal;
    w.resend_at_ns = next.resend_at_ns;
  }
  w.kill_at_ns = next.kill_at_ns;
}

void Master::Impl::stop_all(const std::vector<pid_t>& pids, StopReason reason) {
  for (pid_t pid : pids)
    if (Child* w = table.find(pid)) stop(*w, reason);
}

void Master::Impl::send(Child& w, int sig) {
  if (!w.mark_signalled(sig)) return;
  // ESRCH: it has exited and waits to be reaped.
  if (::kill(w.pid, sig) == -1 && errno != ESRCH)
    PM_LOG(LogLevel::Alert, "kill(" + std::to_string(w.pid) + ", " + std::to_string(sig) +
                                ") failed: " + std::strerror(errno));
}

void Master::Impl::enforce_timeouts() {
  std::uint64_t now = monotonic_ns();
  gens.end_grace_if_over(now); // the reload held: nothing to go back to
  kill_past_stop_deadline(now);
  resend_stop_signals(now);
  kill_timed_out_requests(now);
  // A canary being watched or promoted was ready: its window is not the reload's deadline.
  const bool canary_ready = rollout.active() && rollout.phase != RolloutPhase::Starting;
  if (state == State::Reloading && !canary_ready && gens.deadline_passed(now))
    abandon_reload("generation " + std::to_string(current_gen()) + " not ready after " +
                   seconds_text(ns(current().pool.graceful_timeout)));
}

void Master::Impl::kill_past_stop_deadline(std::uint64_t now) {
  std::size_t killed = 0;
  std::string pids;
  for (Child& w : table.all()) {
    if (!kill_due(w, now)) continue;
    send(w, SIGKILL);
    ++killed;
    pids += ' ';
    pids += std::to_string(w.pid);
  }
  if (killed > 0)
    PM_LOG(LogLevel::Warn, "SIGKILL to " + std::to_string(killed) +
                               " worker(s) still running after their stop timeout:" + pids);
}

void Master::Impl::resend_stop_signals(std::uint64_t now) {
  for (Child& w : table.all())
    if (resend_due(w, now)) {
      ::kill(w.pid, w.stop_signal); // not send(): that one sends each signal once
      w.resend_at_ns = now + ns(w.resend_stop_every);
    }
}

void Master::Impl::kill_timed_out_requests(std::uint64_t now) {
  for (Child& w : table.all()) {
    const WorkerSlot& slot = scoreboard.slot(w.slot);
    const std::size_t threads = slot.thread_count();
    for (std::size_t t = 0; t < threads; ++t) {
      SlotSnapshot s = SlotSnapshot::of(slot, t);
      if (!request_timed_out(w, s, now)) continue;
      Scoreboard::RequestInfo r = Scoreboard::read_request(slot, t);
      redact_shown_uri(r.uri);
      // Taken before the stop: where it hangs is what the person reading this line needs. One
      // thread: the handler runs on the main thread (the pid). Threads: every thread's stack,
      // each under its "TID n:" line, the stuck one named in the line. One form for both.
      std::string stack;
      if (w.stack_trace_on_timeout)
        stack = threads <= 1 ? worker_frames(capture_stack(w.pid, kStackTraceBudget, w.pid))
                             : capture_stack(w.pid, kStackTraceBudget);
      if (!stack.empty() && stack.back() == '\n') stack.pop_back();
      const pid_t tid = s.tid != 0 ? s.tid : w.pid;
      const std::string outcome =
          threads <= 1 ? "the worker is killed"
                       : "its client got 504, the worker stops (its other requests finish)";
      PM_LOG_BLOCK(LogLevel::Error,
                   name(w) + ": request \"" + r.method + " " + r.uri + "\", request id " +
                       r.request_id + ", thread " + std::to_string(t) + " (tid " +
                       std::to_string(tid) + "), ran for " + seconds_text(running_ns(s, now)) +
                       " past --request-timeout (" + seconds_text(ns(w.request_timeout)) +
                       "): " + outcome + (stack.empty() ? "" : "; stack:"),
                   stack);
      ++scoreboard.pool().kills_by_timeout;
      stop(w, StopReason::Timeout);
      break;
    }
  }
}

// Workers that run a request longer than nudge_after while holding other connections (kept
// connections, on which the web server may send a request that would wait for this one) are
// nudged once per request; the worker decides whether another worker is free to take them. Not
// a worker that was only kept off the CPU (nudge_now(): more runnable threads than CPUs, a
// worker preempted inside a short request looks slow to the clock): its connections would wait
// for a CPU in the next worker too, and moving them would cost.
void Master::Impl::nudge_slow_workers() {
  if (table.all().size() < 2) return;
  std::uint64_t now = monotonic_ns();
  for (Child& w : table.all()) {
    SlotSnapshot s = SlotSnapshot::of(scoreboard.slot(w.slot));
    if (!nudge_due(w, s, now) ||
        !nudge_now(w, s.request_start_ns, read_thread_sched(w.pid, s.tid != 0 ? s.tid : w.pid)))
      continue;
    w.nudged_request_ns = s.request_start_ns;
    // With the request's start: a worker that has moved on to its next request by the time it
    // reads the nudge ignores it.
    sigval request{};
    request.sival_ptr = reinterpret_cast<void*>(static_cast<std::uintptr_t>(s.request_start_ns));
    ::sigqueue(w.pid, signals::nudge_signal(), request);
  }
}

// --slow-request-threshold: the worker's stack while its request is still running, once per
// request (the worker logs the request again when it ends, with its duration and status).
void Master::Impl::take_slow_request_stacks() {
  std::uint64_t now = monotonic_ns();
  for (Child& w : table.all()) {
    const WorkerSlot& slot = scoreboard.slot(w.slot);
    const std::size_t threads = slot.thread_count();
    for (std::size_t t = 0; t < threads; ++t) {
      SlotSnapshot s = SlotSnapshot::of(slot, t);
      if (!slow_stack_due(w, s, now)) continue;
      w.slow_stack_request_ns = s.request_start_ns;
      if (!slow_stacks.take(now)) continue;
      Scoreboard::RequestInfo r = Scoreboard::read_request(slot, t);
      redact_shown_uri(r.uri);
      // The request's thread (one thread: the worker's main thread, whose id is the pid).
      pid_t tid = s.tid != 0 ? s.tid : w.pid;
      std::string stack = worker_frames(capture_stack(w.pid, kForensicStackBudget, tid));
      if (!stack.empty() && stack.back() == '\n') stack.pop_back();
      unsigned not_taken = slow_stacks.take_refused();
      std::string skipped =
          not_taken == 0 ? "" : " (" + std::to_string(not_taken) + " more not taken this minute)";
      std::string thread =
          threads <= 1 ? ""
                       : ", thread " + std::to_string(t) + " (tid " + std::to_string(tid) + ")";
      PM_LOG_BLOCK(LogLevel::Warn,
                   "slow request in flight: " + name(w) + thread + ", \"" + r.method + " " + r.uri +
                       "\", request id " + r.request_id + ", running for " +
                       seconds_text(running_ns(s, now)) + " (slow-request-threshold " +
                       seconds_text(ns(w.slow_stack_after)) + ")" + skipped + "; stack:",
                   stack);
      return; // one a turn: a crash report does not wait for several debuggers
    }
  }
}

// The loop's tick: until the next nudge may come due (some worker holds several connections),
// kTick otherwise, so that an idle host stays idle.
std::chrono::milliseconds Master::Impl::tick() const {
  std::chrono::milliseconds wait = kTick;
  if (table.all().size() < 2) return wait;
  const std::uint64_t now = monotonic_ns();
  for (const Child& w : table.all())
    if (std::optional<std::chrono::milliseconds> t =
            nudge_tick(w, SlotSnapshot::of(scoreboard.slot(w.slot)), now))
      wait = std::min(wait, *t);
  return wait;
}

} // namespace process_manager
