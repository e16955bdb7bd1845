#pragma once
// Bounds on what one client may send or make a worker wait for. Defaults: the option table. The
// parser fills them from the options (cli/); the worker enforces them, and its record guard
// (protocol/record_guard.hpp) checks `request` on the wire.
#include "fcgi_host/config/option_table.hpp"

#include <chrono>
#include <cstddef>

namespace fcgi_host {

// What one request may hold, checked record by record before libfcgi reads it.
struct RequestLimits {
  std::size_t max_body = default_size("max-body");               // bytes of FCGI_STDIN; more: 413
  std::size_t max_params_size = default_size("max-params-size"); // FCGI_PARAMS bytes; more: 400
  std::size_t max_params = default_size("max-params");           // name-value pairs; more: 400
  std::size_t max_records = default_size("max-records"); // records in one request; more: closed
  std::size_t max_management_records = 1000; // per connection between two requests; no option
};

struct Limits {
  RequestLimits request;
  std::chrono::milliseconds header_timeout = default_duration("header-timeout"); // to last PARAMS
  std::chrono::milliseconds body_timeout = default_duration("body-timeout"); // between body reads
  std::chrono::milliseconds keepalive_timeout = default_duration("keepalive-timeout"); // idle kept
  std::chrono::milliseconds write_timeout = default_duration("write-timeout"); // stopped reading
  std::size_t max_connections = default_size("max-connections"); // connections of one worker
  // The body's total deadline: --body-timeout, plus one second for every body_min_rate bytes
  // received (a slow but steady upload goes on; a trickle does not).
  std::size_t body_min_rate = default_size("body-min-rate");
  // Bytes of unfinished requests and unsent responses one worker buffers; past it the
  // connections that made the least progress are closed.
  std::size_t max_buffered = default_size("max-buffered");
  // A request body larger than this goes to an unlinked temporary file instead of memory.
  std::size_t spill_threshold = default_size("spill-threshold");
};

} // namespace fcgi_host
