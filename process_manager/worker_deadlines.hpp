#pragma once
// Timeouts and nudges: when the master signals a worker, as pure decisions over the worker's
// record (worker_table.hpp), one read of its scoreboard slot and the clock, so that they are
// unit-tested without processes. The master sends the signals, takes the stacks and writes the
// lines (master_timeouts.cpp: stop(), enforce_timeouts(), nudge_slow_workers(),
// take_slow_request_stacks(), tick()).
//
// - A stop is a signal, then SIGKILL after its escalation (master_state.hpp); a retired worker
//   gets its own generation's retire signal, and, inside a slow request while it holds other
//   connections, the nudge at once (it passes them on); --exec programs get their stop signal
//   again every resend_stop_every until they exit.
// - request_timeout: a request running longer is killed (a stack first); slow_stack_after: a
//   request running longer gets one stack while it goes on, at most kSlowStacksPerMinute a minute;
//   nudge_after: a request running longer beside other connections gets one nudge.
#include "process_manager/master_state.hpp"
#include "process_manager/scoreboard.hpp"
#include "process_manager/thread_sched.hpp"
#include "process_manager/worker_table.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <utility>

namespace process_manager {

// What the deadlines read of a worker's slot, once a turn.
struct SlotSnapshot {
  WorkerState state = WorkerState::Free;
  std::uint64_t request_start_ns = 0; // 0: no request
  std::uint32_t connections = 0;
  bool crashed = false; // its crash handler runs (crash_report.hpp)
  pid_t tid = 0;        // the handler thread (0: the worker's only one)

  // The worker's slot and one of its handler threads' request slot.
  static SlotSnapshot of(const WorkerSlot& s, std::size_t thread = 0);
};

// The first step of a stop: which signal, and when SIGKILL follows. A request timeout in a
// worker of several threads is a graceful stop: its other requests finish.
Escalation stop_escalation(const Child& w, StopReason reason, std::size_t threads = 1);

// What follows the stop signal (none of it when it was SIGKILL).
struct StopFollowUp {
  bool nudge = false;             // send the nudge now
  std::uint64_t resend_at_ns = 0; // repeat the stop signal then (0: never)
  std::uint64_t kill_at_ns = 0;   // SIGKILL then, or at an earlier kill already planned
};
StopFollowUp stop_follow_up(const Child& w, StopReason reason, const Escalation& e,
                            const SlotSnapshot& s, std::uint64_t now_ns);

// The stop deadline has passed: SIGKILL now.
bool kill_due(const Child& w, std::uint64_t now_ns);
// --exec: the stop signal again now.
bool resend_due(const Child& w, std::uint64_t now_ns);

// How long the slot's request has been running (0: none, or a start stamped after now).
std::uint64_t running_ns(const SlotSnapshot& s, std::uint64_t now_ns);
// request_timeout: the request in the handler has run past it (once: not for a worker already
// stopped for a timeout).
bool request_timed_out(const Child& w, const SlotSnapshot& s, std::uint64_t now_ns);
// nudge_after: the request has run past it while the worker holds other connections, and this
// request was not nudged yet.
bool nudge_due(const Child& w, const SlotSnapshot& s, std::uint64_t now_ns);
// A due nudge goes now unless the worker's thread was only kept off the CPU (thread_sched.hpp):
// one that sleeps (its handler waits on something) at once; a runnable one is looked at again a
// tick later, and goes once it ran more than it waited for a CPU meanwhile (a handler that
// computes). Remembers the look in `w`.
bool nudge_now(Child& w, std::uint64_t request_start_ns, const ThreadSched& t);
// slow_stack_after: the request in the handler has run past it and has no stack yet; a crashed
// worker is not slow.
bool slow_stack_due(const Child& w, const SlotSnapshot& s, std::uint64_t now_ns);

// Slow-request stacks stop the master's loop for the debugger's time, and a pool whose every
// request is slow would have one taken for each: at most this many a minute.
inline constexpr unsigned kSlowStacksPerMinute = 10;

class SlowStackBudget {
public:
  // Whether a stack may be taken now; a refusal is counted.
  bool take(std::uint64_t now_ns);
  // The stacks refused since the last call, and forgets them: said in the next stack's line.
  unsigned take_refused() { return std::exchange(refused_, 0); }

private:
  std::uint64_t window_ns_ = 0; // the minute stacks are counted in
  unsigned taken_ = 0;
  unsigned refused_ = 0;
};

// Short enough that timeouts fire on time, long enough that an idle master costs nothing.
inline constexpr std::chrono::milliseconds kTick{100};
// The loop's wait while a nudge may come due for `w` (it holds several connections): until its
// request has run nudge_after (one not nudged yet), or nudge_after when it is between requests
// (one may begin now); at least 1 ms, at most kTick. A nudge so comes on time, and a busy host's
// master wakes once per nudge_after, not twice (each wake-up a context switch on the workers'
// CPUs). nullopt: `w` needs no faster tick.
std::optional<std::chrono::milliseconds> nudge_tick(const Child& w, const SlotSnapshot& s,
                                                    std::uint64_t now_ns);

} // namespace process_manager
