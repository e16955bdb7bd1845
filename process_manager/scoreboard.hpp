#pragma once
// The scoreboard: one slot per worker in shared memory, created by the master before the first
// fork. Each slot has exactly one writer (its worker) and is read by the master and the status
// endpoint, so the hot path takes no lock: plain relaxed atomics, and a sequence counter around
// the few multi-field updates a reader must see whole.
#include <atomic>
#include <cstddef>
#include <cstdint>
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

// Fixed-size strings so that the slot stays trivially shareable across processes.
inline constexpr std::size_t kSlotMethodSize = 16;
inline constexpr std::size_t kSlotUriSize = 232;

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

  // Worker side: publish the request being served (seqlock write of method and uri).
  static void set_request(WorkerSlot& s, const char* method, std::size_t method_len,
                          const char* uri, std::size_t uri_len);
  // Reader side: a consistent copy of method and uri.
  struct RequestInfo {
    char method[kSlotMethodSize];
    char uri[kSlotUriSize];
  };
  static RequestInfo read_request(const WorkerSlot& s);

private:
  WorkerSlot* slots_ = nullptr;
  std::size_t capacity_ = 0;
};

} // namespace process_manager
