#pragma once
// What a crash does to respawning, as a pure class fed with monotonic times, so that it is
// unit-tested without processes or clocks. A crash is a worker killed by a signal or exiting
// non-zero (other than a boot failure); clean exits and request-timeout kills never come here.
//
// - Backoff: the pool respawns no earlier than `delay` after a crash; the delay starts at
//   100 ms and doubles up to 5 s, and starts over after 10 s without a crash.
// - Breaker: more than 10 crashes within 10 s pause respawning for 10 s, with one log line.
// - Log rate: at most one crash line per second; the next line says how many were suppressed,
//   so that a crash storm never fills a disk.
#include <chrono>
#include <cstdint>
#include <deque>

namespace process_manager {

class CrashPolicy {
public:
  struct Settings {
    std::chrono::milliseconds first_delay{100};
    std::chrono::milliseconds max_delay{5000};
    std::chrono::milliseconds reset_after{10'000};
    std::size_t breaker_crashes = 10;                 // trips on more than this many...
    std::chrono::milliseconds breaker_window{10'000}; // ...within this window
    std::chrono::milliseconds breaker_pause{10'000};
    std::chrono::milliseconds log_interval{1000};
  };

  struct Decision {
    std::uint64_t respawn_at_ns = 0; // no respawn before this
    bool log = false;                // write this crash's line
    std::uint64_t suppressed = 0;    // crash lines suppressed since the last one written
    bool breaker_tripped = false;    // write the one breaker line
  };

  CrashPolicy() : CrashPolicy(Settings{}) {}
  explicit CrashPolicy(Settings s) : s_(s) {}

  Decision on_crash(std::uint64_t now_ns);
  std::uint64_t respawn_at_ns() const { return respawn_at_ns_; }
  const Settings& settings() const { return s_; }

private:
  Settings s_;
  std::uint64_t delay_ns_ = 0;
  std::uint64_t last_crash_ns_ = 0;
  std::uint64_t respawn_at_ns_ = 0;
  std::uint64_t paused_until_ns_ = 0;
  std::deque<std::uint64_t> window_;
  bool logged_once_ = false;
  std::uint64_t last_log_ns_ = 0;
  std::uint64_t suppressed_ = 0;
};

} // namespace process_manager
