#pragma once
// The host's area of a worker's scoreboard region (process_manager/scoreboard.hpp): what the
// host counts per worker (connections accepted and handed off, slow and aborted requests, queue
// times, shedding) and its route table. The supervisor maps it beside each worker's slot and
// knows only its size and how to retire it; everything that reads or writes it is here, in
// observe/. One writer per area (the worker's loop thread); the master folds an exited worker's
// area into the retired one.
//
// Never constructed: zero-filled shared pages are an empty area (atomics of value 0 and empty
// route tables, route_stats.hpp).
#include "fcgi_host/observe/route_stats.hpp"
#include "process_manager/scoreboard.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace fcgi_host {

struct HostSlot {
  std::atomic<std::uint64_t> accepted;         // connections
  std::atomic<std::uint64_t> handed_off;       // kept connections passed to another worker
  std::atomic<std::uint64_t> slow_requests;    // past --slow-request-threshold
  std::atomic<std::uint64_t> aborted_requests; // the web server aborted or closed
  std::atomic<std::uint64_t> last_duration_ns; // of the last finished request
  std::atomic<std::uint64_t> last_cpu_ns;      // of the last request sampled for CPU time
  // Queue time (arrival stamped by the web server -> handler start) of the requests that carried
  // a stamp, in the latency buckets (not cumulative); requests not run: waited too long, or
  // their client was gone (see fcgi_host/observe/queue_time.hpp).
  std::atomic<std::uint64_t> queue_buckets[kLatencyBuckets];
  std::atomic<std::uint64_t> queue_sum_ns;
  std::atomic<std::uint64_t> shed_late;
  std::atomic<std::uint64_t> shed_gone;
  // --idle-work-after: the handler's on_idle() runs (each thread's), and their time in all.
  std::atomic<std::uint64_t> idle_work_runs;
  std::atomic<std::uint64_t> idle_work_ns;
  RouteTable routes;
};

// Master side: the exited worker's area is added to the retired one and emptied.
void retire_host_slot(void* retired, void* area);

// Master side: one crashed request of `route` in the retired area's table.
void count_crashed_in_retired(void* retired, std::string_view route);

// What the scoreboard is told of the host's area.
inline constexpr process_manager::HostArea kHostArea{sizeof(HostSlot), retire_host_slot,
                                                     count_crashed_in_retired};

inline HostSlot& host_slot(process_manager::Scoreboard& sb, std::size_t i) {
  return *static_cast<HostSlot*>(sb.host_area(i));
}
inline const HostSlot& host_slot(const process_manager::Scoreboard& sb, std::size_t i) {
  return *static_cast<const HostSlot*>(sb.host_area(i));
}
// The totals of the workers that exited.
inline const HostSlot& retired_host_slot(const process_manager::Scoreboard& sb) {
  return *static_cast<const HostSlot*>(sb.retired_host_area());
}

} // namespace fcgi_host
