#include "fcgi_host/observe/metrics.hpp"

#include "fcgi_host/protocol/capture_redaction.hpp"
#include "process_manager/clock.hpp"
#include "process_manager/log.hpp"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <ctime>
#include <map>

namespace fcgi_host {

using process_manager::LogLevel;
using process_manager::WorkerState;

std::uint64_t thread_cpu_ns() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

RequestMetrics::RequestMetrics(HostSlot& slot, const ObservabilitySettings& settings)
    : slot_(slot), routes_(slot.routes), settings_(settings) {}

namespace {

std::uint32_t fnv1a(std::string_view s) {
  std::uint32_t h = 2166136261u;
  for (unsigned char c : s)
    h = (h ^ c) * 16777619u;
  return h;
}

} // namespace

std::size_t RequestMetrics::route_index(std::string_view route) {
  route = route.substr(0, kRouteNameSize);
  if (route.data() == last_route_ && route.size() == last_route_size_) {
    // The text is compared too: an address is only a hint (a Router rebuilt at the same place).
    const RouteStats& e = routes_.routes[last_index_];
    if (std::string_view(e.name, std::min<std::size_t>(e.name_len, sizeof e.name)) == route)
      return last_index_;
  }
  std::uint32_t h = fnv1a(route);
  // Linear probing over a private index; a full index (more keys than fit) falls back to the
  // table's own linear search, which also handles the overflow entry.
  for (std::size_t i = 0; i < kIndexSize; ++i) {
    std::size_t b = (h + i) % kIndexSize;
    if (index_[b] == 0) {
      std::size_t r = claim_route(routes_, route);
      if (r != kMaxRoutes - 1) { // the overflow entry is not cached by name
        index_[b] = static_cast<std::uint8_t>(r + 1);
        index_hash_[b] = h;
      }
      return r;
    }
    if (index_hash_[b] == h) {
      const RouteStats& e = routes_.routes[index_[b] - 1];
      if (std::string_view(e.name, std::min<std::size_t>(e.name_len, sizeof e.name)) == route) {
        last_route_ = route.data();
        last_route_size_ = route.size();
        last_index_ = index_[b] - 1u;
        return last_index_;
      }
    }
  }
  return claim_route(routes_, route);
}

// The request's trace id when it carried a traceparent, else its request id; the wall clock is
// read here only (vDSO), at most once a second per bucket.
void RequestMetrics::record_exemplar(Exemplar& e, const app::Request& request,
                                     std::uint64_t now_ns) {
  std::string_view trace = request.trace_id();
  std::string_view id = trace.empty() ? request.request_id() : trace;
  if (id.empty()) return; // a request no host numbered (a test's)
  timespec wall;
  clock_gettime(CLOCK_REALTIME, &wall);
  std::uint64_t unix_ms = static_cast<std::uint64_t>(wall.tv_sec) * 1000u +
                          static_cast<std::uint64_t>(wall.tv_nsec) / 1'000'000u;
  write_exemplar(e, id, !trace.empty(), duration_ns_, now_ns, unix_ms);
}

void RequestMetrics::end(std::string_view route, int status, const app::Request& request,
                         bool need_duration, bool aborted) {
  if (aborted) {
    process_manager::single_writer_add(slot_.aborted_requests, 1);
    status = kAbortedStatus;
  }
  if (!settings_.metrics && settings_.slow_threshold_ns == 0 && !need_duration) return;
  std::uint64_t now = process_manager::monotonic_ns();
  duration_ns_ = now > start_ns_ ? now - start_ns_ : 0;
  cpu_ns_ = -1;
  if (cpu_start_ >= 0 && cpu_on_other_thread_) {
    cpu_ns_ = cpu_other_thread_ns_;
  } else if (cpu_start_ >= 0) {
    std::int64_t cpu_end = static_cast<std::int64_t>(thread_cpu_ns());
    cpu_ns_ = cpu_end > cpu_start_ ? cpu_end - cpu_start_ : 0;
  }
  if (settings_.metrics) {
    RouteStats& r = routes_.routes[route_index(route)];
    std::size_t bucket = record_call(r, duration_ns_, cpu_ns_, status >= 500);
    if (responded_ns_ != 0) record_after_response(r, now > responded_ns_ ? now - responded_ns_ : 0);
    if (exemplar_due(r.exemplars[bucket], now)) record_exemplar(r.exemplars[bucket], request, now);
    slot_.last_duration_ns.store(duration_ns_, std::memory_order_relaxed);
    if (cpu_ns_ >= 0)
      slot_.last_cpu_ns.store(static_cast<std::uint64_t>(cpu_ns_), std::memory_order_relaxed);
  }
  if (settings_.slow_threshold_ns != 0 && duration_ns_ > settings_.slow_threshold_ns) {
    process_manager::single_writer_add(slot_.slow_requests, 1);
    PM_LOG(LogLevel::Warn, "slow request: \"" + std::string(request.method()) + " " +
                               std::string(request.uri()) + "\" took " +
                               process_manager::seconds_text(duration_ns_, 3) + ", status " +
                               std::to_string(status) + ", request id " +
                               std::string(request.request_id()) + " (slow-request-threshold " +
                               process_manager::seconds_text(settings_.slow_threshold_ns, 3) + ")");
  }
}

namespace {

// One live worker's row: its slot, and the request it runs longest (with one thread: its own).
WorkerSnapshot worker_snapshot(const process_manager::WorkerSlot& s, WorkerState state,
                               const HostSlot& h, std::size_t i, std::uint64_t now) {
  WorkerSnapshot w;
  w.slot = i;
  w.pid = s.pid.load(std::memory_order_relaxed);
  w.generation = s.generation.load(std::memory_order_relaxed);
  w.state = state;
  w.requests = s.requests.load(std::memory_order_relaxed);
  w.accepted = h.accepted.load(std::memory_order_relaxed);
  w.last_duration_ns = h.last_duration_ns.load(std::memory_order_relaxed);
  w.last_cpu_ns = h.last_cpu_ns.load(std::memory_order_relaxed);
  w.threads = static_cast<std::uint32_t>(std::max<std::size_t>(s.thread_count(), 1));
  w.busy_threads = process_manager::busy_threads(s);
  w.active = process_manager::is_busy(w.state) || w.busy_threads > 0;
  // The request shown: the one running longest (with one thread: the worker's).
  std::uint64_t oldest = 0;
  std::size_t shown = 0;
  for (std::size_t t = 0; w.threads > 1 && t < w.threads; ++t) {
    const process_manager::RequestSlot& r = s.request(t);
    std::uint64_t start = r.request_start_ns.load(std::memory_order_relaxed);
    if (process_manager::is_busy(r.state.load(std::memory_order_relaxed)) && start != 0 &&
        (oldest == 0 || start < oldest)) {
      oldest = start;
      shown = t;
    }
  }
  if (w.active) {
    std::uint64_t start = s.request(shown).request_start_ns.load(std::memory_order_relaxed);
    w.request_duration_ns = start != 0 && now > start ? now - start : 0;
    process_manager::Scoreboard::RequestInfo info =
        process_manager::Scoreboard::read_request(s, shown);
    w.method = info.method;
    w.uri = info.uri;
    // A token in a query string is shown as a captured request shows it: redacted.
    capture::redact_uri_query(w.uri.data(), w.uri.size(), {});
    w.request_id = info.request_id;
  }
  return w;
}

// One pass over the slots and the retired totals. The retire sequence tells whether the master
// moved an exited worker's numbers meanwhile (then the caller reads again).
void read_once(const process_manager::Scoreboard& sb, Snapshot& snap) {
  const process_manager::PoolCounters& p = sb.pool();
  std::uint64_t now = process_manager::monotonic_ns();
  snap.requests = p.retired_requests.load(std::memory_order_relaxed);
  snap.accepted = snap.slow_requests = snap.aborted_requests = snap.handed_off = 0;
  snap.queue_buckets = {};
  snap.queue_sum_ns = snap.shed_late = snap.shed_gone = 0;
  snap.idle_work_runs = snap.idle_work_ns = 0;
  auto add_host = [&snap](const HostSlot& h) {
    snap.accepted += h.accepted.load(std::memory_order_relaxed);
    snap.slow_requests += h.slow_requests.load(std::memory_order_relaxed);
    snap.aborted_requests += h.aborted_requests.load(std::memory_order_relaxed);
    snap.handed_off += h.handed_off.load(std::memory_order_relaxed);
    for (std::size_t b = 0; b < kLatencyBuckets; ++b)
      snap.queue_buckets[b] += h.queue_buckets[b].load(std::memory_order_relaxed);
    snap.queue_sum_ns += h.queue_sum_ns.load(std::memory_order_relaxed);
    snap.shed_late += h.shed_late.load(std::memory_order_relaxed);
    snap.shed_gone += h.shed_gone.load(std::memory_order_relaxed);
    snap.idle_work_runs += h.idle_work_runs.load(std::memory_order_relaxed);
    snap.idle_work_ns += h.idle_work_ns.load(std::memory_order_relaxed);
  };
  add_host(retired_host_slot(sb));
  snap.active = snap.idle = snap.total = 0;
  snap.threads_busy = snap.threads_total = 0;
  snap.workers.clear();
  std::map<std::string, RouteSnapshot, std::less<>> routes;
  auto add_table = [&routes](const RouteTable& t) {
    for (const auto& entry : t.routes) {
      RouteStats r = load_route(entry);
      if (r.name_len == 0) continue;
      std::string name(r.name, std::min<std::size_t>(r.name_len, sizeof r.name));
      RouteSnapshot& out = routes[name];
      out.name = name;
      out.calls += r.calls;
      out.wall_ns += r.wall_ns;
      out.cpu_ns += r.cpu_ns;
      out.cpu_samples += r.cpu_samples;
      out.errors += r.errors;
      out.crashed += r.crashed;
      out.finished_early += r.finished_early;
      out.after_response_ns += r.after_response_ns;
      for (std::size_t b = 0; b < kLatencyBuckets; ++b) {
        out.buckets[b] += r.buckets[b];
        // Of all workers', the newest.
        const Exemplar& e = r.exemplars[b];
        if (e.mono_ns != 0 && e.id_len != 0 && e.unix_ms >= out.exemplars[b].unix_ms)
          out.exemplars[b] = {std::string(e.id, e.id_len), e.is_trace != 0, e.value_ns, e.unix_ms};
      }
    }
  };
  add_table(retired_host_slot(sb).routes);
  for (std::size_t i = 0; i < sb.used(); ++i) {
    const process_manager::WorkerSlot& s = sb.slot(i);
    if (s.generation.load(std::memory_order_relaxed) == 0) continue; // never used
    // An exited worker not yet reaped still holds its numbers: count them, but not the worker.
    const HostSlot& h = host_slot(sb, i);
    add_host(h);
    snap.requests += s.requests.load(std::memory_order_relaxed);
    add_table(h.routes);
    WorkerState st = s.state.load(std::memory_order_relaxed);
    if (st == WorkerState::Free) continue;
    WorkerSnapshot w = worker_snapshot(s, st, h, i, now);
    if (st != WorkerState::Starting) {
      ++snap.total;
      ++(process_manager::is_busy(st) ? snap.active : snap.idle);
      snap.threads_total += w.threads;
      snap.threads_busy += w.busy_threads;
    }
    snap.workers.push_back(std::move(w));
  }
  snap.routes.clear();
  for (auto& [name, r] : routes)
    snap.routes.push_back(std::move(r));
}

} // namespace

Snapshot take_snapshot(const process_manager::Scoreboard& sb, int listen_fd,
                       const std::string& pool_mode) {
  Snapshot snap;
  snap.pool_mode = pool_mode;
  const process_manager::PoolCounters& p = sb.pool();
  // Bounded: a master that died mid-retire leaves the sequence odd for good.
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::uint32_t before = p.retire_seq.load(std::memory_order_acquire);
    read_once(sb, snap);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (before % 2 == 0 && p.retire_seq.load(std::memory_order_relaxed) == before) break;
  }
  snap.start_time_s = p.start_time_s.load(std::memory_order_relaxed);
  std::uint64_t now = process_manager::monotonic_ns();
  std::uint64_t started = p.start_ns.load(std::memory_order_relaxed);
  snap.uptime_s = now > started ? (now - started) / 1'000'000'000u : 0;
  snap.max_active = std::max(p.max_active.load(std::memory_order_relaxed), snap.active);
  snap.max_busy_threads = p.max_busy_threads.load(std::memory_order_relaxed);
  snap.all_busy = p.all_busy.load(std::memory_order_relaxed);
  snap.target_workers = p.target_workers.load(std::memory_order_relaxed);
  snap.max_workers = p.max_workers.load(std::memory_order_relaxed);
  snap.threads_per_worker = static_cast<std::uint32_t>(sb.threads());
  snap.generation_ready = p.ready_generation.load(std::memory_order_relaxed) != 0;
  snap.listen_queue = process_manager::query_listen_queue(listen_fd);
  snap.max_listen_queue =
      std::max(p.max_listen_queue.load(std::memory_order_relaxed), snap.listen_queue.depth);
  snap.kills_by_timeout = p.kills_by_timeout.load(std::memory_order_relaxed);
  snap.requests_lost_crash = p.requests_lost_crash.load(std::memory_order_relaxed);
  snap.oom_kills = p.oom_kills.load(std::memory_order_relaxed);
  snap.rollout_phase = p.rollout_phase.load(std::memory_order_relaxed);
  snap.rollout_generation = p.rollout_generation.load(std::memory_order_relaxed);
  auto side = [](const process_manager::PoolCounters::RolloutSide& from,
                 Snapshot::RolloutSide& to) {
    to.requests = from.requests.load(std::memory_order_relaxed);
    to.errors = from.errors.load(std::memory_order_relaxed);
    to.p99_ns = from.p99_ns.load(std::memory_order_relaxed);
  };
  side(p.rollout_canary, snap.rollout_canary);
  side(p.rollout_old, snap.rollout_old);
  snap.mold.pid = p.mold_pid.load(std::memory_order_relaxed);
  snap.mold.generation = p.mold_generation.load(std::memory_order_relaxed);
  const std::uint64_t mold_start = p.mold_start_ns.load(std::memory_order_relaxed);
  snap.mold.uptime_s =
      snap.mold.pid > 0 && now > mold_start ? (now - mold_start) / 1'000'000'000u : 0;
  for (int c = 0; c < 256; ++c)
    if (std::uint64_t n = p.exits_by_code[c].load(std::memory_order_relaxed))
      snap.exits_by_code.emplace_back(c, n);
  for (int s = 0; s < NSIG; ++s)
    if (std::uint64_t n = p.exits_by_signal[s].load(std::memory_order_relaxed))
      snap.exits_by_signal.emplace_back(s, n);
  return snap;
}

} // namespace fcgi_host
