#include "process_manager/rate_limited_log.hpp"

#include <algorithm>
#include <string>

namespace process_manager {

bool RateLimitedLog::allow(std::uint64_t now) {
  if (rate_.refill_ns == 0) return true; // no limit
  if (!started_) {
    started_ = true;
    refilled_ns_ = now;
  }
  if (std::uint64_t earned = (now - refilled_ns_) / rate_.refill_ns; earned > 0) {
    tokens_ = static_cast<unsigned>(std::min<std::uint64_t>(rate_.burst, tokens_ + earned));
    refilled_ns_ += earned * rate_.refill_ns;
  }
  if (tokens_ > 0) {
    --tokens_;
    return true;
  }
  if (held_++ == 0) {
    bool flooding = last_count_ns_ != 0 && now - last_count_ns_ < rate_.next_count_ns * 2;
    count_due_ns_ = now + (flooding ? rate_.next_count_ns : rate_.first_count_ns);
  }
  return false;
}

unsigned RateLimitedLog::available(std::uint64_t now) const {
  if (rate_.refill_ns == 0) return ~0u;
  if (!started_) return rate_.burst;
  const std::uint64_t earned = (now - refilled_ns_) / rate_.refill_ns;
  return static_cast<unsigned>(std::min<std::uint64_t>(rate_.burst, tokens_ + earned));
}

void RateLimitedLog::write_count(std::uint64_t now, LogLevel level, std::string_view what) {
  PM_LOG(level, std::to_string(held_) + " more " + std::string(what) + " not logged");
  held_ = 0;
  count_due_ns_ = 0;
  last_count_ns_ = now;
}

} // namespace process_manager
