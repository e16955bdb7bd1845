#include "process_manager/backoff.hpp"

#include "process_manager/clock.hpp"

#include <algorithm>

namespace process_manager {

// 0 for a death that is not young or the first young one in a row; then first_delay,
// doubling, capped at max_delay. A streak also ends after `max_delay` plus `young` without a
// death: the slot's last worker then lived, whatever its own age says.
std::uint64_t CrashPolicy::delay_after(Streak& streak, bool young, std::uint64_t now) {
  if (!young || now - streak.last_ns > ns(s_.max_delay) + ns(s_.young)) streak.young_deaths = 0;
  streak.last_ns = now;
  if (!young) return 0;
  ++streak.young_deaths;
  if (streak.young_deaths == 1) return 0;
  std::uint64_t delay = ns(s_.first_delay);
  for (std::uint64_t i = 2; i < streak.young_deaths && delay < ns(s_.max_delay); ++i)
    delay *= 2;
  return std::min(delay, ns(s_.max_delay));
}

CrashPolicy::Decision CrashPolicy::on_crash(std::size_t slot, std::uint64_t lived_ns,
                                            std::uint64_t now, bool captured) {
  if (slot >= slots_.size()) slots_.resize(slot + 1);
  bool young = lived_ns < ns(s_.young);
  Decision d = decide(delay_after(slots_[slot], young, now), young, now, captured);
  d.young_deaths = slots_[slot].young_deaths;
  d.give_up = s_.give_up_after > 0 && d.young_deaths >= s_.give_up_after;
  return d;
}

CrashPolicy::Decision CrashPolicy::on_spawn_failure(std::uint64_t now) {
  // Every failure counts as young; the first one waits too (a fork that failed just now will
  // likely fail again at once).
  std::uint64_t delay = std::max(delay_after(pool_, true, now), ns(s_.first_delay));
  Decision d = decide(delay, true, now, false);
  pool_respawn_at_ns_ = std::max(pool_respawn_at_ns_, d.respawn_at_ns);
  return d;
}

CrashPolicy::Decision CrashPolicy::decide(std::uint64_t delay_ns, bool young, std::uint64_t now,
                                          bool captured) {
  Decision d;
  if (young) {
    window_.push_back(now);
    while (now - window_.front() >= ns(s_.breaker_window))
      window_.pop_front();
    if (window_.size() > s_.breaker_crashes && now >= paused_until_ns_) {
      paused_until_ns_ = now + ns(s_.breaker_pause);
      pool_respawn_at_ns_ = std::max(pool_respawn_at_ns_, paused_until_ns_);
      window_.clear(); // count afresh once the pause is over
      d.breaker_tripped = true;
    }
  }
  d.respawn_at_ns = std::max(now + delay_ns, paused_until_ns_);

  d.log = captured || log_rate_.allow(now);
  return d;
}

} // namespace process_manager
