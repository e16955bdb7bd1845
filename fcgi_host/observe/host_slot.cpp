#include "fcgi_host/observe/host_slot.hpp"

namespace fcgi_host {

void retire_host_slot(void* retired, void* area) {
  HostSlot& into = *static_cast<HostSlot*>(retired);
  HostSlot& from = *static_cast<HostSlot*>(area);
  // The master is the retired area's one writer; the exited worker wrote `from` last.
  for (auto field : {&HostSlot::accepted, &HostSlot::handed_off, &HostSlot::slow_requests,
                     &HostSlot::aborted_requests, &HostSlot::queue_sum_ns, &HostSlot::shed_late,
                     &HostSlot::shed_gone, &HostSlot::idle_work_runs, &HostSlot::idle_work_ns})
    into.*field += (from.*field).exchange(0);
  for (std::size_t b = 0; b < kLatencyBuckets; ++b)
    into.queue_buckets[b] += from.queue_buckets[b].exchange(0);
  from.last_duration_ns = 0;
  from.last_cpu_ns = 0;
  fold_routes(into.routes, from.routes);
}

void count_crashed_in_retired(void* retired, std::string_view route) {
  count_crashed(static_cast<HostSlot*>(retired)->routes, route);
}

} // namespace fcgi_host
