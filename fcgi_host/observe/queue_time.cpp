#include "fcgi_host/observe/queue_time.hpp"

#include "fcgi_host/observe/route_stats.hpp"
#include "process_manager/clock.hpp"
#include "process_manager/log.hpp"

#include <ctime>
#include <string>

namespace fcgi_host {
namespace {

constexpr std::int64_t kDayUs = 86'400'000'000;

using process_manager::single_writer_add;

} // namespace

std::optional<std::int64_t> parse_request_start_us(std::string_view s) {
  if (s.starts_with("t=")) s.remove_prefix(2);
  std::uint64_t whole = 0; // 19 digits fit (ns since the epoch have 19)
  std::size_t i = 0, digits = 0;
  for (; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, ++digits) {
    if (digits == 19) return std::nullopt; // would overflow: not a time
    whole = whole * 10 + static_cast<std::uint64_t>(s[i] - '0');
  }
  if (digits == 0) return std::nullopt;
  // Up to 6 fraction digits (microseconds of a second); more are ignored.
  std::int64_t fraction_us = 0;
  if (i < s.size() && s[i] == '.') {
    std::int64_t scale = 100'000;
    for (++i; i < s.size() && s[i] >= '0' && s[i] <= '9'; ++i, scale /= 10)
      if (scale > 0) fraction_us += (s[i] - '0') * scale;
  }
  if (i != s.size()) return std::nullopt;
  // The unit by magnitude: seconds until the year 5138, then ms, µs, ns.
  auto us = [](std::uint64_t v) { return static_cast<std::int64_t>(v); };
  if (whole < 100'000'000'000u) return us(whole * 1'000'000) + fraction_us;
  if (whole < 100'000'000'000'000u) return us(whole * 1'000) + fraction_us / 1'000;
  if (whole < 100'000'000'000'000'000u) return us(whole);
  return us(whole / 1'000);
}

std::int64_t realtime_us() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts); // vDSO, no system call
  return static_cast<std::int64_t>(ts.tv_sec) * 1'000'000 + ts.tv_nsec / 1'000;
}

std::optional<std::uint64_t> queue_ns(std::int64_t arrival_us, std::int64_t now_us) {
  std::int64_t waited = now_us - arrival_us;
  if (waited > kDayUs) return std::nullopt;
  return waited > 0 ? static_cast<std::uint64_t>(waited) * 1'000 : 0;
}

QueueDecision decide(std::optional<std::uint64_t> waited_ns, std::uint64_t max_ns,
                     bool client_gone) {
  if (max_ns == 0) return QueueDecision::Run;
  if (client_gone) return QueueDecision::ClientGone;
  if (waited_ns && *waited_ns > max_ns) return QueueDecision::ShedLate;
  return QueueDecision::Run;
}

void answer_shed(app::Response& response) {
  response.status = 503;
  response.set_header("Retry-After", "1");
  response.set_content("Service Unavailable: the request waited too long for a worker\n",
                       "text/plain");
}

bool QueueGate::admit(const app::Request& request, app::Response& response) {
  last_ns_ = -1;
  last_shed_ = false;
  std::optional<std::uint64_t> waited;
  std::string_view stamp = request.request_start(); // kRequestStartParam, found as it was decoded
  if (!stamp.empty())
    if (std::optional<std::int64_t> arrival = parse_request_start_us(stamp))
      waited = queue_ns(*arrival, realtime_us());
  if (waited) {
    last_ns_ = static_cast<std::int64_t>(*waited);
    single_writer_add(slot_.queue_buckets[latency_bucket(*waited)], 1);
    single_writer_add(slot_.queue_sum_ns, *waited);
  }
  // Asking whether the client left costs a recv(): only when shedding is on.
  QueueDecision d = decide(waited, max_ns_, max_ns_ != 0 && request.aborted());
  if (d == QueueDecision::Run) return true;
  single_writer_add(d == QueueDecision::ShedLate ? slot_.shed_late : slot_.shed_gone, 1);
  last_shed_ = true;
  answer_shed(response);
  log_shed(d, request);
  return false;
}

void QueueGate::log_shed(QueueDecision why, const app::Request& request) {
  if (!shed_log_.allow(process_manager::monotonic_ns())) return;
  std::string line = why == QueueDecision::ShedLate
                         ? "shed a request that waited " + std::to_string(last_ns_ / 1'000'000) +
                               " ms (over --max-queue-time): "
                         : "did not run a request whose client is gone: ";
  line.append(request.method()).append(" ").append(request.uri());
  if (unsigned long held = shed_log_.take_held())
    line += " (and " + std::to_string(held) + " more since the last such line)";
  PM_LOG(process_manager::LogLevel::Warn, line);
}

} // namespace fcgi_host
