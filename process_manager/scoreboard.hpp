#pragma once
// The scoreboard: one region per worker in shared memory, created by the master before the first
// fork. A region holds what the master reads and acts on (WorkerSlot: pid, generation, state,
// counts, the crash handshake), one RequestSlot per handler thread (the request in flight, its
// start and identity), and an area the host owns (fcgi_host/observe/host_slot.hpp: its counters
// and route tables), opaque here. Each region has exactly one writer (its worker), is read by the
// master and the status endpoint, and starts on a page of its own, so that a worker can make every
// other worker's region read-only for itself (protect_others()). The hot path takes no lock:
// plain relaxed atomics, and a sequence counter around the few multi-field updates a reader must
// see whole.
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
// The route of the request in flight, as the crash handler found it.
inline constexpr std::size_t kSlotRouteSize = 64;

// A worker's crash handler and the master, through the slot (process_manager/crash_report.hpp).
enum class CrashState : std::uint32_t {
  None = 0,
  Waiting,  // the worker caught a fatal signal and waits for the master to take its stack
  Released, // the master is done: the worker dies of the signal
};

// One handler thread's request: the worker's only one with one thread. Written by the thread that
// serves the request (with one thread: the worker's loop), read by the master (request timeouts,
// slow-request stacks, crash blocks) and the status page.
struct alignas(64) RequestSlot {
  // With --threads above 1: Idle, Handling or Writing (with one thread the worker's state says
  // it, and this stays Free).
  std::atomic<WorkerState> state{WorkerState::Free};
  std::atomic<pid_t> tid{0}; // the handler thread (gettid()); 0 with one thread: the worker's pid
  // CLOCK_MONOTONIC nanoseconds when the current request started; 0 when none is.
  std::atomic<std::uint64_t> request_start_ns{0};
  // Odd while the worker rewrites method/uri; readers retry until it is even and unchanged.
  std::atomic<std::uint32_t> request_seq{0};
  char method[kSlotMethodSize]{};
  char uri[kSlotUriSize]{};
  char request_id[kSlotRequestIdSize]{}; // empty: the generated one (id_prefix, request_number)
  // The number of the generated request id (process_manager/request_id.hpp; the prefix is the
  // worker's).
  std::atomic<std::uint64_t> request_number{0};
  // Queue time of the current request (the web server's arrival stamp to handler start), -1
  // when it carried no stamp.
  std::atomic<std::int64_t> queue_ns{-1};
  // CLOCK_MONOTONIC when the current request's response was sent while its handler went on
  // (the host's Response::finish()); 0 otherwise. A crash block says the client had its answer.
  std::atomic<std::uint64_t> responded_ns{0};
  char route[kSlotRouteSize]{}; // of the request in flight, written by the crash handler only
};

struct alignas(64) WorkerSlot {
  std::atomic<pid_t> pid{0};
  std::atomic<std::uint32_t> generation{0};
  // With --threads above 1: Handling while every thread is busy (the pool counts it busy), else
  // Idle or KeepAliveIdle; each thread's own state is in its RequestSlot.
  std::atomic<WorkerState> state{WorkerState::Free};
  // CLOCK_MONOTONIC when the slot left Starting (written with it: by the worker, or by the master
  // for an --exec program); 0 before. A crash's age counts from here (CrashPolicy's "young").
  std::atomic<std::uint64_t> ready_ns{0};
  std::atomic<std::uint32_t> threads{1}; // request slots in use (--threads)
  std::atomic<std::uint64_t> requests{0};
  std::atomic<std::uint32_t> connections{0}; // held now (the master nudges a slow worker only
                                             // when it holds others)
  // The prefix of the worker's generated request ids, drawn once at boot.
  std::atomic<std::uint64_t> id_prefix{0};
  // Written by the worker's crash handler only (crash_report.cpp), read by the master.
  std::atomic<CrashState> crash_state{CrashState::None};
  std::atomic<int> crash_signal{0};
  std::atomic<pid_t> crash_tid{0};
  std::atomic<std::int32_t> crash_thread{-1}; // the request slot of the faulting thread, or -1
  std::atomic<std::uint64_t> crash_ns{0};     // CLOCK_MONOTONIC
  char crash_note[kCrashNoteSize]{};          // one more line for the crash block, if any
  std::atomic<bool> crash_captured{false};    // the note names a file that keeps the request

  // The request slots follow the worker's slot in its region (Scoreboard lays them out).
  RequestSlot& request(std::size_t thread) {
    return reinterpret_cast<RequestSlot*>(this + 1)[thread];
  }
  const RequestSlot& request(std::size_t thread) const {
    return reinterpret_cast<const RequestSlot*>(this + 1)[thread];
  }
  std::size_t thread_count() const { return threads.load(std::memory_order_relaxed); }
};
static_assert(sizeof(WorkerSlot) % alignof(RequestSlot) == 0);

// Handler threads serving a request now: with one thread, whether the worker is busy.
std::uint32_t busy_threads(const WorkerSlot& s);

// Pool-wide numbers next to the slots. One writer: the master.
struct PoolCounters {
  // Odd while the master moves an exited worker's numbers from its slot into the retired totals;
  // a reader summing slots and retired totals retries, so an exit is never a dip or a double count.
  std::atomic<std::uint32_t> retire_seq{0};
  std::atomic<std::uint64_t> retired_requests{0};
  std::atomic<std::uint64_t> start_time_s{0}; // wall clock (seconds since the epoch)
  std::atomic<std::uint64_t> start_ns{0};     // CLOCK_MONOTONIC
  // Sampled on every turn of the master loop (at least every 100 ms).
  std::atomic<std::uint32_t> max_active{0};       // processes with a request in a handler
  std::atomic<std::uint32_t> max_busy_threads{0}; // handler threads in a request (--threads)
  std::atomic<std::uint32_t> max_listen_queue{0};
  std::atomic<std::uint64_t> all_busy{0}; // times every worker was seen busy
  std::atomic<bool> was_all_busy{false};
  // Worker exits the master did not ask for (crashes, recycling), by exit code or signal.
  std::atomic<std::uint64_t> exits_by_code[256]{};
  std::atomic<std::uint64_t> exits_by_signal[NSIG]{};
  std::atomic<std::uint64_t> kills_by_timeout{0}; // request_timeout kills (or threaded stops)
  // Requests in flight in other threads of a worker that crashed (lost with it).
  std::atomic<std::uint64_t> requests_lost_crash{0};
  std::atomic<std::uint64_t> oom_kills{0}; // workers the OOM killer killed (oom_watch.hpp)
  // Set (before any worker is told to retire) once a new master took over after USR2: its
  // workers, in a scoreboard of their own, go on serving and take this pool's kept connections.
  std::atomic<bool> successor_master{false};
  std::atomic<std::uint32_t> slots_used{0}; // regions ever handed to a worker (Scoreboard::used)
  // The pool's limits as the master applies them now (its target and its most workers), and the
  // newest generation that was ready once (0: none yet): for the status page and /readyz.
  std::atomic<std::uint32_t> target_workers{0};
  std::atomic<std::uint32_t> max_workers{0};
  std::atomic<std::uint32_t> ready_generation{0};
  // --rollout canary (rollout.hpp): the last rollout's phase (RolloutPhase) and generation, and
  // its window's figures, the canary's and the old generation's (refreshed while it is watched).
  std::atomic<std::uint32_t> rollout_phase{0};
  std::atomic<std::uint32_t> rollout_generation{0};
  struct RolloutSide {
    std::atomic<std::uint64_t> requests{0};
    std::atomic<std::uint64_t> errors{0};
    std::atomic<std::uint64_t> p99_ns{0};
  };
  RolloutSide rollout_canary;
  RolloutSide rollout_old;
  // --mold on: the current generation's mold (pid 0: none runs), its generation and start
  // (CLOCK_MONOTONIC), written by the master whenever it starts, loses or retires one.
  std::atomic<std::int32_t> mold_pid{0};
  std::atomic<std::uint32_t> mold_generation{0};
  std::atomic<std::uint64_t> mold_start_ns{0};
};

// The host's area in each region (opaque to the scoreboard): its size, and how the master folds
// an exited worker's area into the retired one (zero-filled pages are an empty area).
struct HostArea {
  std::size_t size = 0;
  void (*retire)(void* retired, void* area) = nullptr;
  // A worker died inside a request of `route` (empty: unknown): counted in the retired area.
  void (*count_crashed)(void* retired, std::string_view route) = nullptr;
};

class Scoreboard {
public:
  // Maps `capacity` worker regions of anonymous shared memory (inherited by every fork), each
  // with `threads` request slots and the host's area. Pages of regions never used are never
  // touched.
  explicit Scoreboard(std::size_t capacity, std::size_t threads = 1, HostArea host = {});
  ~Scoreboard();
  Scoreboard(const Scoreboard&) = delete;
  Scoreboard& operator=(const Scoreboard&) = delete;

  std::size_t capacity() const { return capacity_; }
  // Regions ever handed to a worker (readers look no further: no page of an unused one is read).
  std::size_t used() const { return pool_->slots_used.load(std::memory_order_acquire); }
  // Request slots per region.
  std::size_t threads() const { return threads_; }
  WorkerSlot& slot(std::size_t i) { return *reinterpret_cast<WorkerSlot*>(region(i)); }
  const WorkerSlot& slot(std::size_t i) const {
    return *reinterpret_cast<const WorkerSlot*>(region(i));
  }
  // The host's area of region i, and that of the exited workers.
  void* host_area(std::size_t i) { return region(i) + host_offset_; }
  const void* host_area(std::size_t i) const { return region(i) + host_offset_; }
  const void* retired_host_area() const { return retired_; }

  // Master side: readies region i for a new worker of `threads` (at most threads()) handler
  // threads.
  void prepare(std::size_t i, std::uint32_t threads);
  // Worker side, after fork: every region but `own` (and the pool's numbers) read-only for this
  // process. False with errno set when mprotect failed.
  bool protect_others(std::size_t own);

  // Worker side: publish the request being served (seqlock write of method, uri and the id the
  // request carried: empty when the worker generated one).
  static void set_request(RequestSlot& s, const char* method, std::size_t method_len,
                          const char* uri, std::size_t uri_len, std::string_view request_id = {});
  // Reader side: a consistent copy of method, uri and the request id (the carried one, else the
  // generated one; empty for a worker that never numbered its requests).
  struct RequestInfo {
    char method[kSlotMethodSize];
    char uri[kSlotUriSize];
    char request_id[kSlotRequestIdSize];
  };
  static RequestInfo read_request(const WorkerSlot& w, std::size_t thread = 0);

  PoolCounters& pool() { return *pool_; }
  const PoolCounters& pool() const { return *pool_; }

  // Master side. A slot's worker has exited: move its counters into the pool's retired totals.
  void retire(std::size_t i);
  // A slot's worker died inside a request: the faulting thread's route (the crash handler's
  // note, else unknown) counts one `crashed` in the host's retired area.
  void count_crashed_request(std::size_t i);
  // One sample of the pool: max active (busy threads), all-busy transitions, max listen queue.
  void sample(std::uint32_t listen_queue);

private:
  char* region(std::size_t i) const { return regions_ + i * stride_; }

  std::size_t capacity_ = 0;
  std::size_t threads_ = 1;
  HostArea host_;
  std::size_t host_offset_ = 0; // of the host's area in a region
  std::size_t stride_ = 0;      // a region's size, whole pages
  void* map_ = nullptr;         // PoolCounters and the retired host area, then the regions
  std::size_t map_size_ = 0;
  std::size_t head_size_ = 0; // whole pages
  PoolCounters* pool_ = nullptr;
  void* retired_ = nullptr;
  char* regions_ = nullptr;
};

} // namespace process_manager
