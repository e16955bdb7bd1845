#pragma once
// Per-handler (route) aggregates in shared memory: one table per scoreboard slot, written by that
// slot's worker only, and one "retired" table into which the master folds a slot when its worker
// exits, so that recycling, crashes and reloads lose no count. Never one record per call: a fixed
// number of routes per table, fixed latency buckets, counters only.
//
// The tables sit in zero-filled shared memory and are never constructed: plain integers read and
// written through std::atomic_ref (relaxed), so a reader never sees a torn counter and a table
// nobody used costs no memory (its pages are never touched).
#include "process_manager/single_writer.hpp"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string_view>

namespace process_manager {

inline constexpr std::size_t kMaxRoutes = 64; // per table; the last entry is the overflow
inline constexpr std::size_t kRouteNameSize = 64;
inline constexpr std::string_view kOverflowRoute = "(other)";
// Upper bounds of the latency buckets, in nanoseconds; one more bucket takes the rest (+Inf).
inline constexpr std::uint64_t kLatencyBoundsNs[] = {
    1'000'000,     2'500'000,     5'000'000,     10'000'000,  25'000'000,
    50'000'000,    100'000'000,   250'000'000,   500'000'000, 1'000'000'000,
    2'500'000'000, 5'000'000'000, 10'000'000'000};
inline constexpr std::size_t kLatencyBuckets = std::size(kLatencyBoundsNs) + 1;

struct RouteStats {
  std::uint64_t name_len; // 0: unused; stored (release) after the name
  char name[kRouteNameSize];
  std::uint64_t calls;
  std::uint64_t wall_ns;
  std::uint64_t cpu_ns;                   // CPU time of the sampled calls only
  std::uint64_t cpu_samples;              // how many calls were sampled for CPU time
  std::uint64_t errors;                   // responses with status >= 500
  std::uint64_t buckets[kLatencyBuckets]; // not cumulative
};

struct RouteTable {
  RouteStats routes[kMaxRoutes];
};

// The bucket of a duration.
std::size_t latency_bucket(std::uint64_t ns);

// Writer side (the slot's worker). The entry for `name` (truncated to fit), claimed if new; the
// overflow entry once the table is full. Linear: callers cache the index (see RouteIndex).
std::size_t claim_route(RouteTable& table, std::string_view name);

// Adds one call. cpu_ns < 0: this call was not sampled for CPU time.
inline void record_call(RouteStats& r, std::uint64_t wall_ns, std::int64_t cpu_ns, bool error) {
  auto add = [](std::uint64_t& v, std::uint64_t d) {
    single_writer_add(v, d);
  }; // one table, one writer
  add(r.calls, 1);
  add(r.wall_ns, wall_ns);
  add(r.buckets[latency_bucket(wall_ns)], 1);
  if (cpu_ns >= 0) {
    add(r.cpu_ns, static_cast<std::uint64_t>(cpu_ns));
    add(r.cpu_samples, 1);
  }
  if (error) add(r.errors, 1);
}

// Reader side: a copy of one entry (name_len 0 when unused).
RouteStats load_route(const RouteStats& r);

// Master side, once the table's worker is gone: adds every entry of `from` to the entry of the
// same name in `into` (claimed if new, the overflow entry when full), then empties `from`.
void fold_routes(RouteTable& into, RouteTable& from);

} // namespace process_manager
