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

namespace fcgi_host {
using process_manager::single_writer_add;

inline constexpr std::size_t kMaxRoutes = 64; // per table; the last entry is the overflow
inline constexpr std::size_t kRouteNameSize = 64;
inline constexpr std::string_view kOverflowRoute = "(other)";
// A crashed request whose route its worker could not say (killed by SIGKILL, say).
inline constexpr std::string_view kUnknownRoute = "(unknown)";
// Upper bounds of the latency buckets, in nanoseconds; one more bucket takes the rest (+Inf).
inline constexpr std::uint64_t kLatencyBoundsNs[] = {
    1'000'000,     2'500'000,     5'000'000,     10'000'000,  25'000'000,
    50'000'000,    100'000'000,   250'000'000,   500'000'000, 1'000'000'000,
    2'500'000'000, 5'000'000'000, 10'000'000'000};
inline constexpr std::size_t kLatencyBuckets = std::size(kLatencyBoundsNs) + 1;

// The last request of a latency bucket worth pointing at (an OpenMetrics exemplar): a dashboard's
// spike leads to one request's id, hence to its log lines. Refreshed at most once a second per
// bucket, so a request pays one compare, and a formatted id only now and then.
inline constexpr std::size_t kExemplarIdSize = 32;
inline constexpr std::uint64_t kExemplarRefreshNs = 1'000'000'000;
struct Exemplar {
  std::uint64_t seq;     // odd while the writer rewrites it
  std::uint64_t mono_ns; // CLOCK_MONOTONIC when written (0: never)
  std::uint64_t unix_ms; // wall clock at the request's end
  std::uint64_t value_ns;
  std::uint64_t id_len;   // of id, at most kExemplarIdSize
  std::uint64_t is_trace; // 1: id is a W3C trace id, 0: a request id
  char id[kExemplarIdSize];
};

struct RouteStats {
  std::uint64_t name_len; // 0: unused; stored (release) after the name
  char name[kRouteNameSize];
  std::uint64_t calls;
  std::uint64_t wall_ns;
  std::uint64_t cpu_ns;      // CPU time of the sampled calls only
  std::uint64_t cpu_samples; // how many calls were sampled for CPU time
  std::uint64_t errors;      // responses with status >= 500
  std::uint64_t crashed;     // requests their worker died in (master: retired)
  // Calls whose response went out before the handler returned (Response::finish()), and their
  // time after it: the response time of the route is wall_ns - after_response_ns.
  std::uint64_t finished_early;
  std::uint64_t after_response_ns;
  std::uint64_t buckets[kLatencyBuckets]; // not cumulative
  // Of this worker only: an exited worker's are dropped with it (fold_routes()).
  Exemplar exemplars[kLatencyBuckets];
};

struct RouteTable {
  RouteStats routes[kMaxRoutes];
};

// The bucket of a duration.
std::size_t latency_bucket(std::uint64_t ns);

// Writer side (the slot's worker). The entry for `name` (truncated to fit), claimed if new; the
// overflow entry once the table is full. Linear: callers cache the index (see RouteIndex).
std::size_t claim_route(RouteTable& table, std::string_view name);

// Adds one call; returns its latency bucket. cpu_ns < 0: this call was not sampled for CPU time.
inline std::size_t record_call(RouteStats& r, std::uint64_t wall_ns, std::int64_t cpu_ns,
                               bool error) {
  // One writer per table: a relaxed load and store, no locked read-modify-write.
  auto add = [](std::uint64_t& v, std::uint64_t d) { single_writer_add(v, d); };
  add(r.calls, 1);
  add(r.wall_ns, wall_ns);
  std::size_t bucket = latency_bucket(wall_ns);
  add(r.buckets[bucket], 1);
  if (cpu_ns >= 0) {
    add(r.cpu_ns, static_cast<std::uint64_t>(cpu_ns));
    add(r.cpu_samples, 1);
  }
  if (error) add(r.errors, 1);
  return bucket;
}

// A call recorded by record_call() whose response went out `after_ns` before its handler returned.
inline void record_after_response(RouteStats& r, std::uint64_t after_ns) {
  single_writer_add(r.finished_early, 1);
  single_writer_add(r.after_response_ns, after_ns);
}

// Whether a bucket's exemplar is due for a refresh (empty, or older than kExemplarRefreshNs).
inline bool exemplar_due(const Exemplar& e, std::uint64_t now_ns) {
  std::uint64_t at = std::atomic_ref<std::uint64_t>(const_cast<std::uint64_t&>(e.mono_ns))
                         .load(std::memory_order_relaxed);
  return at == 0 || now_ns - at >= kExemplarRefreshNs;
}
// Writer side: replaces the exemplar (seqlock write; `id` cut to kExemplarIdSize).
void write_exemplar(Exemplar& e, std::string_view id, bool is_trace, std::uint64_t value_ns,
                    std::uint64_t now_ns, std::uint64_t unix_ms);
// Reader side: a consistent copy (mono_ns 0 when empty, or when the writer kept rewriting it).
Exemplar load_exemplar(const Exemplar& e);

// Reader side: a copy of one entry (name_len 0 when unused).
RouteStats load_route(const RouteStats& r);

// Master side: a request of route `name` ("" when unknown) ended with its worker's crash; counted
// in `table` (the retired one, the master's).
void count_crashed(RouteTable& table, std::string_view name);

// Master side, once the table's worker is gone: adds every entry of `from` to the entry of the
// same name in `into` (claimed if new, the overflow entry when full), then empties `from`.
void fold_routes(RouteTable& into, RouteTable& from);

} // namespace fcgi_host
