#include "fcgi_host/worker/connection_policy.hpp"

#include "process_manager/clock.hpp"

#include <algorithm>

namespace fcgi_host {

using process_manager::ns;

ConnectionPolicy::ConnectionPolicy(const Limits& limits)
    : header_ns_(ns(limits.header_timeout)), body_ns_(ns(limits.body_timeout)),
      keepalive_ns_(ns(limits.keepalive_timeout)), write_ns_(ns(limits.write_timeout)),
      body_min_rate_(limits.body_min_rate), max_connections_(limits.max_connections),
      max_buffered_(limits.max_buffered) {}

std::uint64_t ConnectionPolicy::body_deadline(std::uint64_t now, std::uint64_t body_start_ns,
                                              std::uint64_t body_bytes) const {
  // Without --body-min-rate the total is twice --body-timeout.
  std::uint64_t earned = body_min_rate_ ? body_bytes * 1'000'000'000ull / body_min_rate_ : body_ns_;
  return std::min(now + body_ns_, body_start_ns + body_ns_ + earned);
}

Expiry ConnectionPolicy::on_deadline(Connection::Phase phase, bool between_requests,
                                     bool params_done, bool stopping) {
  switch (phase) {
  case Connection::Phase::KeptIdle:
    if (between_requests) return stopping ? Expiry::ReleaseStopping : Expiry::CloseIdle;
    break; // part of the next request arrived: a request's deadline, below
  case Connection::Phase::Reading:
    break;
  case Connection::Phase::Writing:
  case Connection::Phase::Serving: // (out of epoll: its thread's deadline is the request's)
  case Connection::Phase::Queued:
    return Expiry::WriteTimeout;
  case Connection::Phase::Draining:
    return Expiry::DrainOver;
  }
  return params_done ? Expiry::BodyTimeout : Expiry::HeadTimeout;
}

const char* ConnectionPolicy::reason(Expiry e) {
  switch (e) {
  case Expiry::HeadTimeout:
    return "request head not received within --header-timeout";
  case Expiry::BodyTimeout:
    return "body not received within --body-timeout (and --body-min-rate)";
  case Expiry::WriteTimeout:
    return "the client did not read the response within --write-timeout";
  case Expiry::CloseIdle:
  case Expiry::ReleaseStopping:
  case Expiry::DrainOver:
    break;
  }
  return nullptr;
}

Pressure ConnectionPolicy::pressure(std::size_t open, std::size_t buffered_bytes) const {
  if (full(open)) return Pressure::Connections;
  if (buffered_bytes > max_buffered_) return Pressure::Buffered;
  return Pressure::None;
}

const char* ConnectionPolicy::reason(Pressure p) {
  switch (p) {
  case Pressure::Connections:
    return "evicted: --max-connections reached and it made the least progress";
  case Pressure::Buffered:
    return "evicted: --max-buffered reached and it made the least progress";
  case Pressure::None:
    break;
  }
  return nullptr;
}

void EvictionScan::consider(int fd, std::uint64_t bytes_in, std::uint64_t started_ns,
                            std::size_t memory, bool may_evict) {
  buffered_ += memory;
  if (!may_evict) return;
  // Progress per second alive; integer maths, no clock read per connection.
  std::uint64_t age_ms = (now_ - started_ns) / 1'000'000 + 1;
  std::uint64_t rate = bytes_in * 1000 / age_ms;
  if (victim_fd_ < 0 || rate < victim_rate_) {
    victim_fd_ = fd;
    victim_rate_ = rate;
  }
}

} // namespace fcgi_host
