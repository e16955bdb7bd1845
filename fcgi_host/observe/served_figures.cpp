#include "fcgi_host/observe/served_figures.hpp"

#include "fcgi_host/observe/host_slot.hpp"

#include <iterator>

namespace fcgi_host {

static_assert(kLatencyBuckets <= process_manager::kFigureBuckets,
              "the rollout's figures have room for every latency bucket");

process_manager::ServedFigures served_figures(const process_manager::Scoreboard& sb,
                                              std::size_t slot) {
  process_manager::ServedFigures f;
  for (const RouteStats& entry : host_slot(sb, slot).routes.routes) {
    const RouteStats r = load_route(entry);
    if (r.name_len == 0) continue;
    f.requests += r.calls;
    f.errors += r.errors;
    for (std::size_t b = 0; b < kLatencyBuckets; ++b)
      f.buckets[b] += r.buckets[b];
  }
  return f;
}

std::vector<std::uint64_t> served_latency_bounds() {
  return {std::begin(kLatencyBoundsNs), std::end(kLatencyBoundsNs)};
}

} // namespace fcgi_host
