#pragma once
// Queue time: how long a request waited between its arrival at the web server and the start of
// its handler, and shedding of requests that waited longer than their client will
// (--max-queue-time).
//
// The web server stamps the arrival: nginx `fastcgi_param HTTP_X_REQUEST_START "t=${msec}";`
// (the X-Request-Start convention of Heroku's router and of APM tools). A request without the
// parameter is neither measured nor shed. The host compares the stamp with CLOCK_REALTIME (vDSO:
// no system call), so the web server must run on the same machine or on one with a synchronised
// clock; a stamp from the future counts as no wait.
//
// In a prefork pool, requests that arrive faster than the workers finish them wait in the listen
// queue; once they wait longer than the client does, every worker runs work nobody waits for and
// goodput collapses. Answering those requests at once with 503 keeps the workers on requests whose
// clients are still there.
#include "app/request.hpp"
#include "app/response.hpp"
#include "fcgi_host/observe/host_slot.hpp"
#include "process_manager/rate_limited_log.hpp"

#include <cstdint>
#include <optional>
#include <string_view>

namespace fcgi_host {

// The FastCGI parameter nginx sets from `fastcgi_param HTTP_X_REQUEST_START ...`.
inline constexpr std::string_view kRequestStartParam = "HTTP_X_REQUEST_START";

// The arrival time in a stamp, in microseconds since the epoch. Accepts an optional "t=" prefix
// and seconds with a fraction (nginx's ${msec}: "t=1700000000.123"), or whole milliseconds,
// microseconds or nanoseconds (told apart by magnitude, as APM tools do). nullopt: not a stamp.
std::optional<std::int64_t> parse_request_start_us(std::string_view stamp);

// CLOCK_REALTIME in microseconds (vDSO, no system call).
std::int64_t realtime_us();

// How long a request stamped `arrival_us` has waited at `now_us`, in ns: 0 for a stamp from the
// future (clock skew), nullopt for one older than a day (not a real stamp).
std::optional<std::uint64_t> queue_ns(std::int64_t arrival_us, std::int64_t now_us);

// Admission control in front of the handler: what --max-queue-time makes of a late request.
struct AdmissionSettings {
  std::uint64_t max_queue_ns = 0; // --max-queue-time; 0: off (measured, never shed)
};

enum class QueueDecision { Run, ShedLate, ClientGone };

// Whether to run a request that waited `waited_ns` (nullopt: not measured). max_ns 0: shedding is
// off, every request runs.
QueueDecision decide(std::optional<std::uint64_t> waited_ns, std::uint64_t max_ns,
                     bool client_gone);

// What a shed request gets: 503 with Retry-After, at once.
void answer_shed(app::Response& response);

// A worker's gate in front of its handler: measures the queue time into the worker's scoreboard
// slot, and, with --max-queue-time, sheds what waited too long or whose client is gone.
class QueueGate {
public:
  QueueGate(HostSlot& slot, const AdmissionSettings& settings)
      : slot_(slot), max_ns_(settings.max_queue_ns) {}

  // Called right before the handler: true to run it; false when `response` already holds the
  // shed answer. Reads no clock for a request without the stamp.
  bool admit(const app::Request& request, app::Response& response);

  // The last admitted or shed request's queue time in ns, -1 when it was not measured.
  std::int64_t last_queue_ns() const { return last_ns_; }
  // Whether the last request was shed (not run).
  bool last_shed() const { return last_shed_; }

private:
  void log_shed(QueueDecision why, const app::Request& request);

  HostSlot& slot_;
  std::uint64_t max_ns_;
  std::int64_t last_ns_ = -1;
  bool last_shed_ = false;
  // Lines about shed requests, rate-limited; the next one written counts those held back.
  process_manager::RateLimitedLog shed_log_;
};

} // namespace fcgi_host
