#include "process_manager/backoff.hpp"

#include <algorithm>

namespace process_manager {

static std::uint64_t ns(std::chrono::milliseconds ms) {
  return static_cast<std::uint64_t>(std::chrono::nanoseconds(ms).count());
}

CrashPolicy::Decision CrashPolicy::on_crash(std::uint64_t now) {
  Decision d;

  if (delay_ns_ == 0 || now - last_crash_ns_ >= ns(s_.reset_after))
    delay_ns_ = ns(s_.first_delay);
  else
    delay_ns_ = std::min(delay_ns_ * 2, ns(s_.max_delay));
  last_crash_ns_ = now;

  window_.push_back(now);
  while (now - window_.front() >= ns(s_.breaker_window))
    window_.pop_front();
  if (window_.size() > s_.breaker_crashes && now >= paused_until_ns_) {
    paused_until_ns_ = now + ns(s_.breaker_pause);
    window_.clear(); // count afresh once the pause is over
    d.breaker_tripped = true;
  }
  respawn_at_ns_ = std::max(now + delay_ns_, paused_until_ns_);
  d.respawn_at_ns = respawn_at_ns_;

  if (!logged_once_ || now - last_log_ns_ >= ns(s_.log_interval)) {
    d.log = true;
    d.suppressed = suppressed_;
    suppressed_ = 0;
    last_log_ns_ = now;
    logged_once_ = true;
  } else {
    ++suppressed_;
  }
  return d;
}

} // namespace process_manager
