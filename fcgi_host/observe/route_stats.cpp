#include "fcgi_host/observe/route_stats.hpp"

#include <algorithm>
#include <cstring>

namespace fcgi_host {

namespace {

std::uint64_t load(const std::uint64_t& v, std::memory_order order = std::memory_order_relaxed) {
  // atomic_ref<const T> only arrives in C++26; the reference is only read.
  return std::atomic_ref<std::uint64_t>(const_cast<std::uint64_t&>(v)).load(order);
}

void store(std::uint64_t& v, std::uint64_t x, std::memory_order order = std::memory_order_relaxed) {
  std::atomic_ref<std::uint64_t>(v).store(x, order);
}

// The retired table has one writer too: the master, which folds exited workers into it.
void add(std::uint64_t& v, std::uint64_t d) {
  single_writer_add(v, d);
}

std::string_view name_of(const RouteStats& r, std::uint64_t len) {
  return {r.name, static_cast<std::size_t>(len)};
}

// One writer per table: the name is written before its length is published (release).
void claim(RouteStats& r, std::string_view name) {
  std::size_t n = std::min(name.size(), kRouteNameSize);
  std::memcpy(r.name, name.data(), n);
  store(r.name_len, n, std::memory_order_release);
}

} // namespace

std::size_t latency_bucket(std::uint64_t ns) {
  std::size_t i = 0;
  while (i < std::size(kLatencyBoundsNs) && ns > kLatencyBoundsNs[i])
    ++i;
  return i;
}

std::size_t claim_route(RouteTable& table, std::string_view name) {
  if (name.empty()) name = "/";
  name = name.substr(0, kRouteNameSize);
  constexpr std::size_t kLast = kMaxRoutes - 1;
  for (std::size_t i = 0; i < kLast; ++i) {
    RouteStats& r = table.routes[i];
    std::uint64_t len = load(r.name_len);
    if (len == 0) {
      claim(r, name);
      return i;
    }
    if (name_of(r, len) == name) return i;
  }
  if (load(table.routes[kLast].name_len) == 0) claim(table.routes[kLast], kOverflowRoute);
  return kLast;
}

RouteStats load_route(const RouteStats& r) {
  RouteStats copy{};
  copy.name_len = load(r.name_len, std::memory_order_acquire);
  if (copy.name_len == 0) return copy;
  std::memcpy(copy.name, r.name, sizeof copy.name);
  copy.calls = load(r.calls);
  copy.wall_ns = load(r.wall_ns);
  copy.cpu_ns = load(r.cpu_ns);
  copy.cpu_samples = load(r.cpu_samples);
  copy.errors = load(r.errors);
  copy.crashed = load(r.crashed);
  copy.finished_early = load(r.finished_early);
  copy.after_response_ns = load(r.after_response_ns);
  for (std::size_t b = 0; b < kLatencyBuckets; ++b) {
    copy.buckets[b] = load(r.buckets[b]);
    copy.exemplars[b] = load_exemplar(r.exemplars[b]);
  }
  return copy;
}

void write_exemplar(Exemplar& e, std::string_view id, bool is_trace, std::uint64_t value_ns,
                    std::uint64_t now_ns, std::uint64_t unix_ms) {
  std::uint64_t seq = load(e.seq);
  store(e.seq, seq + 1);
  std::atomic_thread_fence(std::memory_order_release);
  std::size_t n = std::min(id.size(), kExemplarIdSize);
  if (n != 0) std::memcpy(e.id, id.data(), n);
  store(e.id_len, n);
  store(e.is_trace, is_trace ? 1 : 0);
  store(e.value_ns, value_ns);
  store(e.unix_ms, unix_ms);
  store(e.mono_ns, now_ns);
  store(e.seq, seq + 2, std::memory_order_release);
}

Exemplar load_exemplar(const Exemplar& e) {
  Exemplar copy{};
  // Bounded: a worker killed mid-write leaves the counter odd for good.
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::uint64_t before = load(e.seq, std::memory_order_acquire);
    copy.mono_ns = load(e.mono_ns);
    copy.unix_ms = load(e.unix_ms);
    copy.value_ns = load(e.value_ns);
    copy.id_len = std::min<std::uint64_t>(load(e.id_len), kExemplarIdSize);
    copy.is_trace = load(e.is_trace);
    std::memcpy(copy.id, e.id, sizeof copy.id);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (before % 2 == 0 && load(e.seq) == before) return copy;
  }
  return Exemplar{};
}

void count_crashed(RouteTable& table, std::string_view name) {
  add(table.routes[claim_route(table, name.empty() ? kUnknownRoute : name)].crashed, 1);
}

void fold_routes(RouteTable& into, RouteTable& from) {
  for (RouteStats& src : from.routes) {
    RouteStats r = load_route(src);
    if (r.name_len == 0) continue;
    // The retired table has one writer too (the master): claim_route is safe on it.
    RouteStats& dst = into.routes[claim_route(into, name_of(r, r.name_len))];
    add(dst.calls, r.calls);
    add(dst.wall_ns, r.wall_ns);
    add(dst.cpu_ns, r.cpu_ns);
    add(dst.cpu_samples, r.cpu_samples);
    add(dst.errors, r.errors);
    add(dst.crashed, r.crashed);
    add(dst.finished_early, r.finished_early);
    add(dst.after_response_ns, r.after_response_ns);
    for (std::size_t b = 0; b < kLatencyBuckets; ++b)
      add(dst.buckets[b], r.buckets[b]);
    // Emptied for the slot's next worker; the name bytes stay until it claims the entry again.
    store(src.name_len, 0);
    for (std::uint64_t* v : {&src.calls, &src.wall_ns, &src.cpu_ns, &src.cpu_samples, &src.errors,
                             &src.crashed, &src.finished_early, &src.after_response_ns})
      store(*v, 0);
    for (std::uint64_t& b : src.buckets)
      store(b, 0);
    for (Exemplar& e : src.exemplars)
      store(e.mono_ns, 0);
  }
}

} // namespace fcgi_host
