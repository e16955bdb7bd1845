#pragma once
// The master's record of its live workers, and which scoreboard slots they hold.
#include "process_manager/log_handover.hpp"
#include "process_manager/master_state.hpp"

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace process_manager {

// One child the master forked to serve (the host's worker, or an --exec program): what the
// master knows of it and what it has done to it. Its own view is the scoreboard slot.
struct Child {
  pid_t pid = 0;
  std::size_t slot = 0;
  std::uint32_t generation = 0;
  std::uint64_t started_at_ns = 0;
  // From the worker's generation: a reload must not change the rules for workers already running.
  std::chrono::milliseconds graceful_timeout{0};
  std::chrono::milliseconds request_timeout{0};
  int retire_signal = 0;
  int reopen_logs_signal = 0;
  // Where the master hands this worker its logs after USR1 (invalid: the worker reopens them
  // itself). Closed when the worker is reaped.
  LogHandover log_handover;
  bool stack_trace_on_timeout = false;
  std::chrono::milliseconds resend_stop_every{0};
  std::chrono::milliseconds nudge_after{0};
  std::chrono::milliseconds boot_window{0}; // PoolSettings::boot_window
  std::chrono::milliseconds slow_stack_after{0};
  std::uint64_t nudged_request_ns = 0; // the request start the last nudge was for
  // A due nudge's first look at a runnable thread (nudge_now()): its request, and the
  // scheduler's times then.
  std::uint64_t sched_request_ns = 0;
  std::uint64_t sched_run_ns = 0;
  std::uint64_t sched_wait_ns = 0;
  int stop_signal = 0;                     // the graceful signal last sent, for resend_stop_every
  std::uint64_t resend_at_ns = 0;          // 0: nothing to repeat
  std::uint64_t slow_stack_request_ns = 0; // the request start the last slow-request stack was for
  // Taken while the worker waited in its crash handler: written with its exit line.
  std::string crash_block;

  // Dynamic and ondemand pools: since when the scoreboard has shown it idle with the same request
  // count (0: busy, or not seen idle yet).
  std::uint64_t idle_since_ns = 0;
  std::uint64_t requests_seen = 0;

  // Set once the master has asked it to go: it no longer counts toward the pool's target.
  std::optional<StopReason> stop_reason;
  std::uint64_t kill_at_ns = 0; // 0: no SIGKILL scheduled
  std::uint64_t signalled = 0;  // bit n: signal n already sent

  bool stopping() const { return stop_reason.has_value(); }
  // True the first time only: each stop signal goes to a worker at most once (gunicorn d1a09732).
  bool mark_signalled(int sig);
  bool was_signalled(int sig) const { return signalled & (std::uint64_t{1} << sig); }
};

class WorkerTable {
public:
  explicit WorkerTable(std::size_t capacity) : slot_used_(capacity, false) {}

  // The lowest free slot, now reserved; nullopt when all are taken.
  std::optional<std::size_t> allocate_slot();
  void release_slot(std::size_t slot) { slot_used_.at(slot) = false; }
  // Takes this slot again (for a crashed worker's replacement); false when it is taken.
  bool reserve_slot(std::size_t slot) {
    if (slot_used_.at(slot)) return false;
    slot_used_[slot] = true;
    return true;
  }

  void add(Child w) { workers_.push_back(std::move(w)); }
  // Forgets the worker and frees its slot.
  std::optional<Child> remove(pid_t pid);
  Child* find(pid_t pid);

  std::vector<Child>& all() { return workers_; }
  const std::vector<Child>& all() const { return workers_; }
  bool empty() const { return workers_.empty(); }
  std::size_t size() const { return workers_.size(); }
  // Workers of `generation` not asked to stop.
  std::size_t count_active(std::uint32_t generation) const;
  // Workers of any other generation not asked to stop.
  std::size_t count_active_except(std::uint32_t generation) const;

private:
  std::vector<Child> workers_;
  std::vector<bool> slot_used_;
};

} // namespace process_manager
