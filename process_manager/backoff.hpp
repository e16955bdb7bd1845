#pragma once
// What a crash does to respawning, as a pure class fed with monotonic times, so that it is
// unit-tested without processes or clocks. A crash is a worker killed by a signal or exiting
// non-zero after it was ready (a death before is a boot failure: worker_exit.hpp); clean exits
// and request-timeout kills never come here.
//
// - Backoff, per scoreboard slot: a worker that lived `young` (1 s) or more since it was ready
//   (the master counts from then, not from the fork: a slow boot does not hide a crash loop) is
//   replaced at once, and its slot starts over; one that died younger is replaced at once the
//   first time, then after 100 ms, doubling up to 5 s, for each young death of that slot in a
//   row. So random kills of healthy workers never hold the pool back, and a slot that crashes
//   at once slows down on its own without delaying the others.
// - Breaker: more than 10 young deaths within 10 s pause all respawning for 10 s, one line.
// - A failed spawn (fork, no slot) delays the whole pool like a young death of its own.
// - Giving up (give_up_after, 0: never): that many young deaths in a row of one slot, and the
//   slot is given up (the master of several pools gives up a pool whose master keeps dying
//   young: 6).
// - Log rate: the first `log_burst` (3) crashes of a burst each have their block, then one a
//   `log_interval` (1 s) (a RateLimitedLog); the count of the others is written on the master's
//   timer once the burst is over (a second after the first held back, then every 5 s while it
//   goes on), so that a crash storm never fills a disk. A crash whose request was captured
//   (--capture-crashes) always has its block: the file it names is bounded by its own limit.
//   A block has a stack at most once a `log_interval` (take_stack_turn).
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
    unsigned log_burst = 3;
    std::chrono::milliseconds log_count_repeat{5000};
    std::size_t give_up_after = 0; // young deaths in a row of one slot; 0: never
  };

  struct Decision {
    std::uint64_t respawn_at_ns = 0; // no respawn in this slot before this
    bool log = false;                // write this crash's line
    bool breaker_tripped = false;    // write the one breaker line
    bool give_up = false;            // give_up_after young deaths in a row: no respawn
    std::uint64_t young_deaths = 0;  // of this slot, in a row (this one included)
  };

  CrashPolicy() : CrashPolicy(Settings{}) {}
  explicit CrashPolicy(Settings s)
      : s_(s), log_rate_(RateLimitedLog::Rate{s.log_burst, ns(s.log_interval), ns(s.log_interval),
                                              ns(s.log_count_repeat)}),
        stack_rate_(RateLimitedLog::Rate{1, ns(s.log_interval), 0, 0}) {}

  // The worker in `slot` crashed at `now_ns` after living `lived_ns`; `captured`: its request
  // was kept in a file (its line is written whatever the rate).
  Decision on_crash(std::size_t slot, std::uint64_t lived_ns, std::uint64_t now_ns,
                    bool captured = false);
  // A spawn failed: the whole pool waits.
  Decision on_spawn_failure(std::uint64_t now_ns);
  // Whether a crash now would have its line written (the log rate above): the master takes a
  // crashed worker's stack only for a line that will be written.
  // How many crash lines the rate lets through now.
  unsigned lines_due(std::uint64_t now_ns) const { return log_rate_.available(now_ns); }
  // Whether the master may run its debugger for a crash now, taking that turn: one a
  // `log_interval`, whatever the lines, so that the time it takes does not slow a crash loop
  // down below the breaker's notice (its deaths would no longer be young).
  bool take_stack_turn(std::uint64_t now_ns) { return stack_rate_.allow(now_ns); }
  // When the count of the crash lines held back is due (0: none held): the master wakes for it.
  std::uint64_t held_count_due_ns() const { return log_rate_.due_ns(); }
  // That count once due (0 otherwise), forgotten: the master writes it as one line.
  unsigned long take_held_count(std::uint64_t now_ns) { return log_rate_.take_due(now_ns); }
  // No spawn at all before this (breaker pause, failed spawns).
  std::uint64_t pool_respawn_at_ns() const { return pool_respawn_at_ns_; }
  const Settings& settings() const { return s_; }

private:
  struct Streak {
    std::uint64_t young_deaths = 0; // in a row
    std::uint64_t last_ns = 0;
  };
  std::uint64_t delay_after(Streak& streak, bool young, std::uint64_t now);
  Decision decide(std::uint64_t delay_ns, bool young, std::uint64_t now, bool captured);

  Settings s_;
  std::vector<Streak> slots_;
  Streak pool_;
  std::uint64_t pool_respawn_at_ns_ = 0;
  std::uint64_t paused_until_ns_ = 0;
  std::deque<std::uint64_t> window_;
  RateLimitedLog log_rate_;   // the lines it holds back are counted on the master's timer
  RateLimitedLog stack_rate_; // the debugger's turns (what it holds back is not counted)
};

} // namespace process_manager
