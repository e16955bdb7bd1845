#pragma once
// When each wait of a connection ends, what its end means, and which connection makes room
// under pressure: pure decisions over times, byte counts and phases. No socket, no clock (the
// caller passes `now`), no table: the event loop reads the clock, asks, and acts, so that every
// rule here is tested alone (tests/unit/test_connection_policy.cpp).
//
// Why these rules:
//  - The head has one total deadline (--header-timeout), set when the worker first waits for
//    it: a client that sends a byte now and then cannot stretch it.
//  - The body may pause at most --body-timeout between two reads, and its total grows only with
//    what arrived (--body-min-rate bytes buy one more second): a slow but steady upload goes on,
//    a trickle is cut however steady it is.
//  - A kept connection between requests rests --keepalive-timeout; a stopping worker's only
//    kStopIdleNs (it is passed on or closed when it is least likely to meet a request).
//  - Under pressure the connection that made the least progress (bytes in per ms alive) is
//    closed, so a flood of idle or trickling connections cannot lock out the web server. One
//    whose response is being written, or whose request runs, is never chosen.
#include "fcgi_host/config/limits.hpp"
#include "fcgi_host/worker/connection.hpp"

#include <cstddef>
#include <cstdint>

namespace fcgi_host {

// A stopping worker with nobody to hand its kept connections to: how long one may rest before
// it is closed, and how long requests arriving on kept connections are still served.
inline constexpr std::uint64_t kStopIdleNs = 100'000'000;
inline constexpr std::uint64_t kStopServeNs = 3'000'000'000;
// Reading what a refused client still sends, so that the error page is not lost to a reset.
inline constexpr std::uint64_t kDrainNs = 2'000'000'000;

// What a connection's passed deadline calls for.
enum class Expiry {
  CloseIdle,       // a kept connection rested --keepalive-timeout: closed, nothing logged
  ReleaseStopping, // a stopping worker's kept connection: passed on or closed, or tried again
  HeadTimeout,     // closed: the head did not arrive within --header-timeout
  BodyTimeout,     // closed: the body did not arrive in time (--body-timeout, --body-min-rate)
  WriteTimeout,    // closed: the client did not read the response within --write-timeout
  DrainOver,       // a refused client's grace is over: closed, nothing logged
};

// What makes room necessary.
enum class Pressure { None, Connections, Buffered };

class ConnectionPolicy {
public:
  explicit ConnectionPolicy(const Limits& limits);

  // ---- deadlines (all in monotonic ns)
  // A kept connection waiting for its next request.
  std::uint64_t next_request_deadline(std::uint64_t now, bool stopping) const {
    return now + (stopping ? kStopIdleNs : keepalive_ns_);
  }
  // The head's total deadline, from the moment the worker first waited for it.
  std::uint64_t head_deadline(std::uint64_t first_wait_ns) const {
    return first_wait_ns + header_ns_;
  }
  // The body's deadline now: the sooner of the pause allowed from now and the total earned.
  std::uint64_t body_deadline(std::uint64_t now, std::uint64_t body_start_ns,
                              std::uint64_t body_bytes) const;
  // A buffered response's total deadline, from the request's start.
  std::uint64_t write_deadline(std::uint64_t request_start_ns) const {
    return request_start_ns + write_ns_;
  }
  std::uint64_t write_timeout_ns() const { return write_ns_; }
  // At a stop, a kept connection resting between requests waits no longer than kStopIdleNs.
  static std::uint64_t stop_idle_deadline(std::uint64_t now, std::uint64_t deadline) {
    return deadline > now + kStopIdleNs ? now + kStopIdleNs : deadline;
  }

  // ---- a passed deadline
  static Expiry on_deadline(Connection::Phase phase, bool between_requests, bool params_done,
                            bool stopping);
  // The log line's reason for a close, or nullptr for a close that is no client's fault.
  static const char* reason(Expiry e);

  // ---- pressure
  Pressure pressure(std::size_t open, std::size_t buffered_bytes) const;
  bool full(std::size_t open) const { return open >= max_connections_; }
  static const char* reason(Pressure p);

  // The epoll timeout until `earliest` (0: none, wait for ever): rounded up, so that a wait
  // never ends just before a deadline and spins.
  static int wait_timeout_ms(std::uint64_t earliest, std::uint64_t now) {
    if (earliest == 0) return -1;
    if (earliest <= now) return 0;
    return static_cast<int>((earliest - now) / 1'000'000 + 1);
  }

private:
  std::uint64_t header_ns_, body_ns_, keepalive_ns_, write_ns_;
  std::size_t body_min_rate_;
  std::size_t max_connections_, max_buffered_;
};

// One pass over the table under pressure: the memory held, and the connection that made the
// least progress (ties: the first considered). Fed by the caller, one connection at a time.
class EvictionScan {
public:
  explicit EvictionScan(std::uint64_t now) : now_(now) {}

  // `memory`: the connection's buffers' capacity (held, not just used). `may_evict`: false for
  // a connection whose response is being written or whose request runs.
  void consider(int fd, std::uint64_t bytes_in, std::uint64_t started_ns, std::size_t memory,
                bool may_evict);

  int victim_fd() const { return victim_fd_; } // -1: none may be evicted
  std::size_t buffered_bytes() const { return buffered_; }

private:
  std::uint64_t now_;
  std::size_t buffered_ = 0;
  int victim_fd_ = -1;
  std::uint64_t victim_rate_ = 0;
};

} // namespace fcgi_host
