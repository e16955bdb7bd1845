#pragma once
// What a crash does to respawning, as a pure class fed with monotonic times, so that it is
// unit-tested without processes or clocks. A crash is a worker killed by a signal or exiting
// non-zero after it was ready (a death before is a boot failure: worker_exit.hpp); clean exits
// and request-timeout kills never come here.
//
// - Backoff, per scoreboard slot: a worker that lived `young` (1 s) or more is replaced at once,
//   and its slot starts over; one that died younger is replaced at once the first time, then
//   after 100 ms, doubling up to 5 s, for each young death of that slot in a row. So random
//   kills of healthy workers never hold the pool back, and a slot that crashes at boot slows
//   down on its own without delaying the others.
// - Breaker: more than 10 young deaths within 10 s pause all respawning for 10 s, one line.
// - A failed spawn (fork, no slot) delays the whole pool like a young death of its own.
// - Giving up (give_up_after, 0: never): that many young deaths in a row of one slot, and the
//   slot is given up (the master of several pools gives up a pool whose master keeps dying
//   young: 6).
// - Log rate: one crash line per second (a RateLimitedLog of one line a `log_interval`); the next
//   line says how many were suppressed, so that a crash storm never fills a disk.
#include "process_manager/clock.hpp"
#include "process_manager/rate_limited_log.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

namespace process_manager {

class CrashPolicy {
public:
  struct Settings {
    std::chrono::milliseconds young{1000};
    std::chrono::milliseconds first_delay{100};
    std::chrono::milliseconds max_delay{5000};
    std::size_t breaker_crashes = 10;                 // trips on more than this many...
    std::chrono::milliseconds breaker_window{10'000}; // ...young deaths within this window
    std::chrono::milliseconds breaker_pause{10'000};
    std::chrono::milliseconds log_interval{1000};
    std::size_t give_up_after = 0; // young deaths in a row of one slot; 0: never
  };

  struct Decision {
    std::uint64_t respawn_at_ns = 0; // no respawn in this slot before this
    bool log = false;                // write this crash's line
    std::uint64_t suppressed = 0;    // crash lines suppressed since the last one written
    bool breaker_tripped = false;    // write the one breaker line
    bool give_up = false;            // give_up_after young deaths in a row: no respawn
    std::uint64_t young_deaths = 0;  // of this slot, in a row (this one included)
  };

  CrashPolicy() : CrashPolicy(Settings{}) {}
  explicit CrashPolicy(Settings s)
      : s_(s), log_rate_(RateLimitedLog::Rate{1, ns(s.log_interval), 0, 0}) {}

  // The worker in `slot` crashed at `now_ns` after living `lived_ns`.
  Decision on_crash(std::size_t slot, std::uint64_t lived_ns, std::uint64_t now_ns);
  // A spawn failed: the whole pool waits.
  Decision on_spawn_failure(std::uint64_t now_ns);
  // Whether a crash now would have its line written (the log rate above): the master takes a
  // crashed worker's stack only for a line that will be written.
  bool log_due(std::uint64_t now_ns) const { return log_rate_.would_allow(now_ns); }
  // No spawn at all before this (breaker pause, failed spawns).
  std::uint64_t pool_respawn_at_ns() const { return pool_respawn_at_ns_; }
  const Settings& settings() const { return s_; }

private:
  struct Streak {
    std::uint64_t young_deaths = 0; // in a row
    std::uint64_t last_ns = 0;
  };
  std::uint64_t delay_after(Streak& streak, bool young, std::uint64_t now);
  Decision decide(std::uint64_t delay_ns, bool young, std::uint64_t now);

  Settings s_;
  std::vector<Streak> slots_;
  Streak pool_;
  std::uint64_t pool_respawn_at_ns_ = 0;
  std::uint64_t paused_until_ns_ = 0;
  std::deque<std::uint64_t> window_;
  RateLimitedLog log_rate_; // the lines it holds back are counted in the next one
};

} // namespace process_manager
