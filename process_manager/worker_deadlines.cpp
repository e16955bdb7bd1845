#include "process_manager/worker_deadlines.hpp"

#include "process_manager/clock.hpp"
#include "process_manager/signals.hpp"

#include <algorithm>
#include <csignal>

namespace process_manager {

SlotSnapshot SlotSnapshot::of(const WorkerSlot& s, std::size_t thread) {
  SlotSnapshot v;
  const RequestSlot& r = s.request(thread);
  v.state = s.thread_count() <= 1 ? s.state.load(std::memory_order_relaxed)
                                  : r.state.load(std::memory_order_relaxed);
  v.request_start_ns = r.request_start_ns.load(std::memory_order_relaxed);
  v.tid = r.tid.load(std::memory_order_relaxed);
  v.connections = s.connections.load(std::memory_order_relaxed);
  v.crashed = s.crash_state.load(std::memory_order_acquire) != CrashState::None;
  return v;
}

Escalation stop_escalation(const Child& w, StopReason reason, std::size_t threads) {
  // A request timeout in one of several threads ends that request only (the worker cuts it):
  // the others finish within the graceful timeout, as in any graceful stop.
  if (reason == StopReason::Timeout && threads > 1) reason = StopReason::Graceful;
  Escalation e = escalation(reason, w.graceful_timeout);
  if (reason == StopReason::Retire) e.signal = w.retire_signal;
  return e;
}

StopFollowUp stop_follow_up(const Child& w, StopReason reason, const Escalation& e,
                            const SlotSnapshot& s, std::uint64_t now_ns) {
  StopFollowUp f;
  if (e.signal == SIGKILL) return f;
  // A retired worker inside a slow request would look at its stop only after the handler: the
  // nudge has it pass its other connections on now, to the workers that go on.
  f.nudge = reason == StopReason::Retire && w.nudge_after.count() != 0 && s.request_start_ns != 0 &&
            s.connections >= 2;
  if (w.resend_stop_every.count() > 0) f.resend_at_ns = now_ns + ns(w.resend_stop_every);
  std::uint64_t kill_at = now_ns + ns(e.kill_after);
  f.kill_at_ns = w.kill_at_ns == 0 || kill_at < w.kill_at_ns ? kill_at : w.kill_at_ns;
  return f;
}

bool kill_due(const Child& w, std::uint64_t now_ns) {
  return w.kill_at_ns != 0 && now_ns >= w.kill_at_ns && !w.was_signalled(SIGKILL);
}

bool resend_due(const Child& w, std::uint64_t now_ns) {
  return w.resend_at_ns != 0 && now_ns >= w.resend_at_ns && !w.was_signalled(SIGKILL);
}

std::uint64_t running_ns(const SlotSnapshot& s, std::uint64_t now_ns) {
  if (s.request_start_ns == 0 || now_ns < s.request_start_ns) return 0;
  return now_ns - s.request_start_ns;
}

namespace {
// The slot's request has run longer than `limit` (0: off), and the worker is not being killed.
bool ran_past(const Child& w, std::chrono::milliseconds limit, const SlotSnapshot& s,
              std::uint64_t now_ns) {
  return limit.count() != 0 && !w.was_signalled(SIGKILL) && running_ns(s, now_ns) > ns(limit);
}
} // namespace

bool request_timed_out(const Child& w, const SlotSnapshot& s, std::uint64_t now_ns) {
  return is_busy(s.state) && w.stop_reason != StopReason::Timeout &&
         ran_past(w, w.request_timeout, s, now_ns);
}

bool nudge_due(const Child& w, const SlotSnapshot& s, std::uint64_t now_ns) {
  return s.request_start_ns != w.nudged_request_ns && s.connections >= 2 &&
         ran_past(w, w.nudge_after, s, now_ns);
}

bool nudge_now(Child& w, std::uint64_t request_start_ns, const ThreadSched& t) {
  if (!t.known || !t.runnable) return true;
  const bool looked = w.sched_request_ns == request_start_ns;
  const std::uint64_t ran = t.run_ns - w.sched_run_ns;
  const std::uint64_t waited = t.wait_ns - w.sched_wait_ns;
  w.sched_request_ns = request_start_ns;
  w.sched_run_ns = t.run_ns;
  w.sched_wait_ns = t.wait_ns;
  return looked && ran >= waited;
}

bool slow_stack_due(const Child& w, const SlotSnapshot& s, std::uint64_t now_ns) {
  // Later than the last request stacked: starts only grow, and each thread's request is stacked
  // once though several run at a time.
  return is_busy(s.state) && s.request_start_ns > w.slow_stack_request_ns && !s.crashed &&
         ran_past(w, w.slow_stack_after, s, now_ns);
}

bool SlowStackBudget::take(std::uint64_t now_ns) {
  if (now_ns - window_ns_ >= ns(std::chrono::minutes(1))) {
    window_ns_ = now_ns;
    taken_ = 0;
  }
  if (taken_ == kSlowStacksPerMinute) {
    ++refused_;
    return false;
  }
  ++taken_;
  return true;
}

std::optional<std::chrono::milliseconds> nudge_tick(const Child& w, const SlotSnapshot& s,
                                                    std::uint64_t now_ns) {
  if (w.nudge_after.count() == 0 || s.connections < 2) return std::nullopt;
  std::uint64_t wait = ns(w.nudge_after); // between requests: one may begin now
  if (s.request_start_ns != 0 && s.request_start_ns != w.nudged_request_ns) {
    const std::uint64_t ran = running_ns(s, now_ns);
    wait = ran >= wait ? 0 : wait - ran; // this request's nudge is due then
  }
  const auto ms = std::chrono::milliseconds((wait + 999'999) / 1'000'000); // (not before it)
  return std::clamp(ms, std::chrono::milliseconds{1}, kTick);
}

} // namespace process_manager
