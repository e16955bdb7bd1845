#include "fcgi_host/worker/client_error_log.hpp"

#include "process_manager/clock.hpp"
#include "process_manager/log.hpp"

#include <algorithm>

namespace fcgi_host {

using process_manager::LogLevel;

void ClientErrorLog::write(Kind kind, const std::string& line) {
  Bucket& b = buckets_[static_cast<std::size_t>(kind)];
  std::uint64_t now = process_manager::monotonic_ns();
  if (!b.started) {
    b.started = true;
    b.refilled_ns = now;
  }
  if (std::uint64_t earned = (now - b.refilled_ns) / kRefillNs; earned > 0) {
    b.tokens = static_cast<unsigned>(std::min<std::uint64_t>(kBurst, b.tokens + earned));
    b.refilled_ns += earned * kRefillNs;
  }
  if (b.tokens > 0) {
    --b.tokens;
    PM_LOG(LogLevel::Warn, line);
    return;
  }
  if (b.suppressed++ == 0) {
    bool flooding = b.last_count_ns != 0 && now - b.last_count_ns < kNextCountNs * 2;
    b.count_due_ns = now + (flooding ? kNextCountNs : kFirstCountNs);
  }
}

std::uint64_t ClientErrorLog::due_ns() const {
  std::uint64_t due = 0;
  for (const Bucket& b : buckets_)
    if (b.suppressed && (due == 0 || b.count_due_ns < due)) due = b.count_due_ns;
  return due;
}

void ClientErrorLog::flush_due(std::uint64_t now_ns) {
  for (Bucket& b : buckets_) {
    if (!b.suppressed || now_ns < b.count_due_ns) continue;
    PM_LOG(LogLevel::Warn, std::to_string(b.suppressed) + " more client errors not logged");
    b.suppressed = 0;
    b.count_due_ns = 0;
    b.last_count_ns = now_ns;
  }
}

} // namespace fcgi_host
