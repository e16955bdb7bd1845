#pragma once
// The scoreboard: one slot per worker in shared memory, created by the master before the first
// fork. Each slot has exactly one writer (its worker) and is read by the master and the status
// endpoint, so the hot path takes no lock: plain relaxed atomics, and a sequence counter around
// the few multi-field updates a reader must see whole.
#include "process_manager/route_stats.hpp"

#include <atomic>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <sys/types.h>

namespace process_manager {

enum class WorkerState : std::uint8_t {
  Free = 0,      // slot unused
  Starting,      // forked, not yet accepting
  Idle,          // waiting for a connection or a request
  Reading,       // reading a request's records
  Handling,      // inside the handler
  Writing,       // writing the response
  KeepAliveIdle, // holds kept connections, none of them with a request
  Stopping,      // graceful stop requested
};

const char* to_string(WorkerState s);

// Serving a request: inside the handler or writing its response.
inline bool is_busy(WorkerState s) {
  return s == WorkerState::Handling || s == WorkerState::Writing;
}
// Waiting in its loop and free to take a new connection: reading is event-driven, so partial
// requests and kept connections do not hold a worker.
inline bool is_waiting(WorkerState s) {
  return s == WorkerState::Idle || s == WorkerState::Reading || s == WorkerState::KeepAliveIdle;
}

// The method a worker that cannot boot leaves in its slot, with the reason as the uri.
inline constexpr const char* kBootFailureMethod = "(boot)";

// Fixed-size strings so that the slot stays trivially shareable across processes.
inline constexpr std::size_t kSlotMethodSize = 16;
inline constexpr std::size_t kSlotUriSize = 232;
// An id the request carried (X-Request-Id, or traceparent's trace id), cut to fit.
inline constexpr std::size_t kSlotRequestIdSize = 64;
// A line the worker's crash recorder adds to its crash block ("request captured to ...").
inline constexpr std::size_t kCrashNoteSize = 384;

// A worker's crash handler and the master, through the slot (process_manager/crash_report.hpp).
enum class CrashState : std::uint32_t {
  None = 0,
  Waiting,  // the worker caught a fatal signal and waits for the master to take its stack
  Released, // the master is done: the worker dies of the signal
};

struct alignas(64) WorkerSlot {
  std::atomic<pid_t> pid{0};
  std::atomic<std::uint32_t> generation{0};
  std::atomic<WorkerState> state{WorkerState::Free};
  // CLOCK_MONOTONIC nanoseconds when the current request started reading; 0 when none is.
  std::atomic<std::uint64_t> request_start_ns{0};
  std::atomic<std::uint64_t> requests{0};
  // Odd while the worker rewrites method/uri; readers retry until it is even and unchanged.
  std::atomic<std::uint32_t> request_seq{0};
  char method[kSlotMethodSize]{};
  char uri[kSlotUriSize]{};
  char request_id[kSlotRequestIdSize]{}; // empty: the generated one (id_prefix, request_number)
  // The generated request id of the current request (process_manager/request_id.hpp): the
  // prefix is drawn once at boot, the number stored per request.
  std::atomic<std::uint64_t> id_prefix{0};
  std::atomic<std::uint64_t> request_number{0};
  // Queue time of the current request (the web server's arrival stamp to handler start), -1
  // when it carried no stamp.
  std::atomic<std::int64_t> queue_ns{-1};
  // Written by the worker's crash handler only (crash_report.cpp), read by the master.
  std::atomic<CrashState> crash_state{CrashState::None};
  std::atomic<int> crash_signal{0};
  std::atomic<pid_t> crash_tid{0};
  std::atomic<std::uint64_t> crash_ns{0};  // CLOCK_MONOTONIC
  char crash_route[kRouteNameSize]{};      // the route of the request in flight, if known
  char crash_note[kCrashNoteSize]{};       // one more line for the crash block, if any
  std::atomic<bool> crash_captured{false}; // the note names a file that keeps the request
  // This worker's counters; the master folds them into PoolCounters when it exits.
  std::atomic<std::uint64_t> accepted{0};    // connections
  std::atomic<std::uint64_t> handed_off{0};  // kept connections passed to another worker
  std::atomic<std::uint32_t> connections{0}; // held now (the master nudges a slow worker only
                                             // when it holds others)
  std::atomic<std::uint64_t> slow_requests{0};
  std::atomic<std::uint64_t> aborted_requests{0}; // the web server aborted or closed
  std::atomic<std::uint64_t> last_duration_ns{0}; // of the last finished request
  std::atomic<std::uint64_t> last_cpu_ns{0};      // of the last request sampled for CPU time
  // Queue time (arrival stamped by the web server -> handler start) of the requests that carried
  // a stamp, in the latency buckets (not cumulative); requests not run: waited too long, or
  // their client was gone (see fcgi_host/observe/queue_time.hpp).
  std::atomic<std::uint64_t> queue_buckets[kLatencyBuckets]{};
  std::atomic<std::uint64_t> queue_sum_ns{0};
  std::atomic<std::uint64_t> shed_late{0};
  std::atomic<std::uint64_t> shed_gone{0};
};

// Pool-wide numbers next to the slots. One writer: the master.
struct PoolCounters {
  // Odd while the master moves an exited worker's numbers from its slot into the retired totals;
  // a reader summing slots and retired totals retries, so an exit is never a dip or a double count.
  std::atomic<std::uint32_t> retire_seq{0};
  std::atomic<std::uint64_t> retired_accepted{0};
  std::atomic<std::uint64_t> retired_requests{0};
  std::atomic<std::uint64_t> retired_slow_requests{0};
  std::atomic<std::uint64_t> retired_aborted_requests{0};
  std::atomic<std::uint64_t> retired_handed_off{0};
  std::atomic<std::uint64_t> retired_queue_buckets[kLatencyBuckets]{};
  std::atomic<std::uint64_t> retired_queue_sum_ns{0};
  std::atomic<std::uint64_t> retired_shed_late{0};
  std::atomic<std::uint64_t> retired_shed_gone{0};
  std::atomic<std::uint64_t> start_time_s{0}; // wall clock (seconds since the epoch)
  std::atomic<std::uint64_t> start_ns{0};     // CLOCK_MONOTONIC
  // Sampled on every turn of the master loop (at least every 100 ms).
  std::atomic<std::uint32_t> max_active{0};
  std::atomic<std::uint32_t> max_listen_queue{0};
  std::atomic<std::uint64_t> all_busy{0}; // times every worker was seen busy
  std::atomic<bool> was_all_busy{false};
  // Worker exits the master did not ask for (crashes, recycling), by exit code or signal.
  std::atomic<std::uint64_t> exits_by_code[256]{};
  std::atomic<std::uint64_t> exits_by_signal[NSIG]{};
  std::atomic<std::uint64_t> kills_by_timeout{0}; // request_timeout kills
  std::atomic<std::uint64_t> oom_kills{0};        // workers the OOM killer killed (oom_watch.hpp)
  // Set (before any worker is told to retire) once a new master took over after USR2: its
  // workers, in a scoreboard of their own, go on serving and take this pool's kept connections.
  std::atomic<bool> successor_master{false};
};

class Scoreboard {
public:
  // Maps `capacity` slots of anonymous shared memory (inherited by every fork).
  explicit Scoreboard(std::size_t capacity);
  ~Scoreboard();
  Scoreboard(const Scoreboard&) = delete;
  Scoreboard& operator=(const Scoreboard&) = delete;

  std::size_t capacity() const { return capacity_; }
  WorkerSlot& slot(std::size_t i) { return slots_[i]; }
  const WorkerSlot& slot(std::size_t i) const { return slots_[i]; }

  // Worker side: publish the request being served (seqlock write of method, uri and the id the
  // request carried: empty when the worker generated one).
  static void set_request(WorkerSlot& s, const char* method, std::size_t method_len,
                          const char* uri, std::size_t uri_len, std::string_view request_id = {});
  // Reader side: a consistent copy of method, uri and the request id (the carried one, else the
  // generated one; empty for a worker that never numbered its requests).
  struct RequestInfo {
    char method[kSlotMethodSize];
    char uri[kSlotUriSize];
    char request_id[kSlotRequestIdSize];
  };
  static RequestInfo read_request(const WorkerSlot& s);

  PoolCounters& pool() { return *pool_; }
  const PoolCounters& pool() const { return *pool_; }
  // Per-handler aggregates: slot i's (written by its worker), and those of exited workers.
  RouteTable& routes(std::size_t i) { return tables_[i + 1]; }
  const RouteTable& routes(std::size_t i) const { return tables_[i + 1]; }
  const RouteTable& retired_routes() const { return tables_[0]; }

  // Master side. A slot's worker has exited: move its counters into the pool's retired totals.
  void retire(std::size_t i);
  // A slot's worker died inside a request: its route (the crash handler's note, else unknown)
  // counts one `crashed`.
  void count_crashed_request(std::size_t i);
  // One sample of the pool: max active, all-busy transitions, max listen queue.
  void sample(std::uint32_t listen_queue);

private:
  WorkerSlot* slots_ = nullptr;
  std::size_t capacity_ = 0;
  void* extra_ = nullptr; // PoolCounters, then capacity_ + 1 route tables (retired first)
  std::size_t extra_size_ = 0;
  PoolCounters* pool_ = nullptr;
  RouteTable* tables_ = nullptr;
};

} // namespace process_manager
