#pragma once
// Metrics: what a worker adds per request (RequestMetrics, the hot path) and what a status reader
// sums over the scoreboard (take_snapshot).
//
// Cost per request with --metrics on: two vDSO clock reads (CLOCK_MONOTONIC, no system call), a
// cached route lookup and a handful of relaxed atomic adds into the worker's own slot. CPU time
// needs clock_gettime(CLOCK_THREAD_CPUTIME_ID), a real system call on Linux (no vDSO), so it is
// sampled: every kCpuSampleEvery-th request of a worker is measured, and the per-route CPU total
// is estimated as (sampled CPU / samples) x calls. --metrics off leaves one clock read (the
// request timeout needs it) and the scoreboard state stores.
#include "app/request.hpp"
#include "fcgi_host/net/client_filter.hpp"
#include "fcgi_host/observe/host_slot.hpp"
#include "process_manager/listen_queue.hpp"
#include "process_manager/scoreboard.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fcgi_host {

inline constexpr unsigned kCpuSampleEvery = 64;

// The status an aborted request is logged with (access and slow log): nginx's "client closed
// request", whatever the handler answered.
inline constexpr int kAbortedStatus = 499;

// The observability part of a worker's settings (cli/settings_from_config.cpp fills it).
struct ObservabilitySettings {
  bool metrics = true;
  std::uint64_t slow_threshold_ns = 0; // 0: off
  std::string status_path;             // empty: off
  std::string ping_path;               // empty: off
  std::string ping_response = "pong";
  ClientFilter status_allow;
  std::string pool_mode = "static";
  std::string pool_name = "fcgi-host"; // a pool's name (docs/pools.md), php-fpm's "pool" field
  std::string sandbox = "off";         // what --sandbox applies (describe_sandbox)
};

// Thread CPU time in ns: a system call, only on sampled requests.
std::uint64_t thread_cpu_ns();

// Worker side: one per worker, used on every request.
class RequestMetrics {
public:
  RequestMetrics(HostSlot& slot, const ObservabilitySettings& settings);

  // The request starts (start_ns: CLOCK_MONOTONIC, already read by the caller).
  void begin(std::uint64_t start_ns) {
    start_ns_ = start_ns;
    responded_ns_ = 0;
    cpu_start_ = -1;
    if (settings_.metrics && ++sample_counter_ % kCpuSampleEvery == 0)
      cpu_start_ = cpu_on_other_thread_ ? 0 : static_cast<std::int64_t>(thread_cpu_ns());
  }
  // Response::finish(): the response went out at `now_ns` while the handler goes on; end()
  // then records the response time beside the total.
  void responded(std::uint64_t now_ns) { responded_ns_ = now_ns; }
  // The response is written (or the web server gave up on it: `aborted`, counted apart and logged
  // with kAbortedStatus). Records the call under `route`; logs it when slow (with the
  // request's method, URI and id). Reads the clock only when something needs the duration
  // (metrics, slow log, or `need_duration`).
  void end(std::string_view route, int status, const app::Request& request, bool need_duration,
           bool aborted = false);

  // A handler thread's requests, which begin() and end() see on the worker's loop thread: the
  // handler thread reads its own CPU clock around the handler when cpu_due() (the same samples),
  // and the loop gives its figure to set_cpu_ns() before end().
  void measure_cpu_on_other_thread() { cpu_on_other_thread_ = true; }
  bool cpu_due() const { return cpu_start_ >= 0; }
  void set_cpu_ns(std::int64_t ns) { cpu_other_thread_ns_ = ns; }

  std::uint64_t duration_ns() const { return duration_ns_; }
  std::int64_t cpu_ns() const { return cpu_ns_; } // -1 when this request was not sampled

private:
  std::size_t route_index(std::string_view route);
  void record_exemplar(Exemplar& e, const app::Request& request, std::uint64_t now_ns);

  HostSlot& slot_;
  RouteTable& routes_;
  const ObservabilitySettings& settings_;
  std::uint64_t start_ns_ = 0;
  std::uint64_t duration_ns_ = 0;
  std::uint64_t responded_ns_ = 0; // Response::finish()'s moment, or 0
  std::int64_t cpu_start_ = -1;
  std::int64_t cpu_ns_ = -1;
  unsigned sample_counter_ = 0;
  bool cpu_on_other_thread_ = false;
  std::int64_t cpu_other_thread_ns_ = -1;
  // Private index from a route name's hash to its entry in the slot's table: the common case is
  // one hash and one compare. 0: empty, else index + 1.
  static constexpr std::size_t kIndexSize = 256;
  std::array<std::uint8_t, kIndexSize> index_{};
  std::array<std::uint32_t, kIndexSize> index_hash_{};
  // The last route and its entry, by its text's address: a route's text lives as long as its
  // Router, or forever (app::Request::route()), so the same address is almost surely the same
  // route (the text is compared still), and one route request after request skips the hash.
  const char* last_route_ = nullptr;
  std::size_t last_route_size_ = 0;
  std::size_t last_index_ = 0;
};

// ---- reading -----------------------------------------------------------------------------------

// A process's PSS (its shared pages divided among the processes that map them) and RSS, in bytes.
struct ProcessMemory {
  std::uint64_t pss_bytes = 0;
  std::uint64_t rss_bytes = 0;
};

struct WorkerSnapshot {
  std::size_t slot = 0;
  pid_t pid = 0;
  std::uint32_t generation = 0;
  process_manager::WorkerState state = process_manager::WorkerState::Free;
  std::uint64_t requests = 0;
  std::uint64_t accepted = 0;
  std::uint64_t request_duration_ns = 0; // the current request so far (0: none)
  std::string method, uri, request_id;   // the current request
  std::uint64_t last_duration_ns = 0;
  std::uint64_t last_cpu_ns = 0;
  std::uint32_t threads = 1;           // handler threads (--threads)
  std::uint32_t busy_threads = 0;      // of them, serving a request now
  bool active = false;                 // serving a request (with threads: at least one)
  std::optional<ProcessMemory> memory; // when the page's reader could read it (process_memory.hpp)
};

// A latency bucket's exemplar (route_stats.hpp); id empty when the bucket has none.
struct ExemplarSnapshot {
  std::string id;
  bool is_trace = false; // a W3C trace id (else a request id)
  std::uint64_t value_ns = 0;
  std::uint64_t unix_ms = 0;
};

struct RouteSnapshot {
  std::string name;
  std::uint64_t calls = 0;
  std::uint64_t wall_ns = 0;
  std::uint64_t cpu_ns = 0;
  std::uint64_t cpu_samples = 0;
  std::uint64_t errors = 0;
  std::uint64_t crashed = 0;           // requests their worker died in (not in calls)
  std::uint64_t finished_early = 0;    // calls that used Response::finish()
  std::uint64_t after_response_ns = 0; // their time after it (wall_ns less it: response time)
  std::array<std::uint64_t, kLatencyBuckets> buckets{};
  std::array<ExemplarSnapshot, kLatencyBuckets> exemplars{};
  // CPU total estimated from the samples.
  std::uint64_t cpu_estimate_ns() const {
    return cpu_samples ? static_cast<std::uint64_t>(static_cast<double>(cpu_ns) /
                                                    static_cast<double>(cpu_samples) *
                                                    static_cast<double>(calls))
                       : 0;
  }
};

struct Snapshot {
  std::string pool_mode;
  std::string sandbox; // the workers' sandbox, one line
  std::string pool_name = "fcgi-host";
  std::uint64_t start_time_s = 0; // epoch
  std::uint64_t uptime_s = 0;
  std::uint64_t accepted = 0;
  std::uint64_t handed_off = 0; // kept connections a worker passed to another
  std::uint64_t requests = 0;
  std::uint64_t slow_requests = 0;
  std::uint64_t aborted_requests = 0;
  std::uint32_t active = 0, idle = 0, total = 0;
  // Handler threads of the workers counted in total (one each without --threads), and of them
  // those serving a request now.
  std::uint32_t threads_total = 0, threads_busy = 0;
  std::uint32_t max_active = 0;       // processes
  std::uint32_t max_busy_threads = 0; // handler threads (one per process without --threads)
  std::uint64_t all_busy = 0;
  // The process manager's limits: the workers it keeps now, the most it may run, the handler
  // threads of each; and whether a generation of the pool was ready once (all its workers).
  std::uint32_t target_workers = 0, max_workers = 0, threads_per_worker = 1;
  bool generation_ready = false;
  process_manager::ListenQueue listen_queue;
  std::uint32_t max_listen_queue = 0;
  std::uint64_t kills_by_timeout = 0;
  std::uint64_t oom_kills = 0;           // workers killed by the OOM killer in the pool's cgroup
  std::uint64_t requests_lost_crash = 0; // beside the faulting one, in threads of a crashed worker
  // Queue time of the requests stamped by the web server, and the requests shed.
  std::array<std::uint64_t, kLatencyBuckets> queue_buckets{};
  std::uint64_t queue_sum_ns = 0;
  std::uint64_t shed_late = 0, shed_gone = 0;
  std::uint64_t idle_work_runs = 0, idle_work_ns = 0; // the handlers' on_idle() (--idle-work-after)
  std::uint64_t queued() const {
    std::uint64_t n = 0;
    for (std::uint64_t b : queue_buckets)
      n += b;
    return n;
  }
  std::vector<std::pair<int, std::uint64_t>> exits_by_code, exits_by_signal; // non-zero only
  std::vector<WorkerSnapshot> workers;
  std::vector<RouteSnapshot> routes; // sorted by name
  // PSS of the master and of the workers with memory, and how many processes those are (0: no
  // figure, the master could not be read).
  std::uint64_t pss_total_bytes = 0;
  std::uint32_t pss_processes = 0;
  // The last canary rollout (process_manager/rollout.hpp): its phase, generation, and its
  // window's figures, the canary's and the old generation's.
  std::uint32_t rollout_phase = 0, rollout_generation = 0;
  struct RolloutSide {
    std::uint64_t requests = 0, errors = 0, p99_ns = 0;
  };
  RolloutSide rollout_canary, rollout_old;
  // --mold on: the current generation's mold (pid 0: none), and its memory when it was read.
  struct Mold {
    pid_t pid = 0;
    std::uint32_t generation = 0;
    std::uint64_t uptime_s = 0;
    std::optional<ProcessMemory> memory;
  } mold;
};

// Sums the scoreboard: live slots and what exited workers left. A worker answering the status
// page shows idle (it serves the page before marking itself busy): the page does not count itself.
Snapshot take_snapshot(const process_manager::Scoreboard& scoreboard, int listen_fd,
                       const std::string& pool_mode);

} // namespace fcgi_host
