#include "process_manager/scoreboard.hpp"

#include "process_manager/clock.hpp"
#include "process_manager/request_id.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <new>
#include <string>
#include <sys/mman.h>
#include <system_error>
#include <time.h>

namespace process_manager {

const char* to_string(WorkerState s) {
  switch (s) {
  case WorkerState::Free:
    return "free";
  case WorkerState::Starting:
    return "starting";
  case WorkerState::Idle:
    return "idle";
  case WorkerState::Reading:
    return "reading";
  case WorkerState::Handling:
    return "handling";
  case WorkerState::Writing:
    return "writing";
  case WorkerState::KeepAliveIdle:
    return "keepalive-idle";
  case WorkerState::Stopping:
    return "stopping";
  }
  return "?";
}

Scoreboard::Scoreboard(std::size_t capacity) : capacity_(capacity) {
  // MAP_SHARED|MAP_ANONYMOUS: every worker forked later sees the same pages.
  void* p = mmap(nullptr, capacity * sizeof(WorkerSlot), PROT_READ | PROT_WRITE,
                 MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    throw std::system_error(errno, std::generic_category(),
                            "mmap(scoreboard of " + std::to_string(capacity) + " slots) failed");
  slots_ = static_cast<WorkerSlot*>(p);
  for (std::size_t i = 0; i < capacity; ++i)
    new (&slots_[i]) WorkerSlot;

  // The route tables are not constructed: zero-filled pages are empty tables (route_stats.hpp),
  // and the pages of slots never used are never touched.
  std::size_t pool_size = (sizeof(PoolCounters) + 63) / 64 * 64;
  extra_size_ = pool_size + (capacity + 1) * sizeof(RouteTable);
  void* e = mmap(nullptr, extra_size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (e == MAP_FAILED) {
    int err = errno;
    munmap(slots_, capacity * sizeof(WorkerSlot));
    throw std::system_error(err, std::generic_category(), "mmap(scoreboard metrics) failed");
  }
  extra_ = e;
  pool_ = new (e) PoolCounters;
  tables_ = reinterpret_cast<RouteTable*>(static_cast<char*>(e) + pool_size);
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  pool_->start_time_s = static_cast<std::uint64_t>(now.tv_sec);
  pool_->start_ns = monotonic_ns();
}

Scoreboard::~Scoreboard() {
  // WorkerSlot is trivially destructible (atomics and char arrays): unmapping is enough.
  munmap(slots_, capacity_ * sizeof(WorkerSlot));
  munmap(extra_, extra_size_);
}

void Scoreboard::retire(std::size_t i) {
  WorkerSlot& s = slots_[i];
  PoolCounters& p = *pool_;
  std::uint32_t seq = p.retire_seq.load(std::memory_order_relaxed);
  p.retire_seq.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  p.retired_accepted += s.accepted.exchange(0);
  p.retired_requests += s.requests.exchange(0);
  p.retired_slow_requests += s.slow_requests.exchange(0);
  p.retired_aborted_requests += s.aborted_requests.exchange(0);
  p.retired_handed_off += s.handed_off.exchange(0);
  s.connections.store(0, std::memory_order_relaxed);
  for (std::size_t b = 0; b < kLatencyBuckets; ++b)
    p.retired_queue_buckets[b] += s.queue_buckets[b].exchange(0);
  p.retired_queue_sum_ns += s.queue_sum_ns.exchange(0);
  p.retired_shed_late += s.shed_late.exchange(0);
  p.retired_shed_gone += s.shed_gone.exchange(0);
  fold_routes(tables_[0], tables_[i + 1]);
  p.retire_seq.store(seq + 2, std::memory_order_release);
}

void Scoreboard::count_crashed_request(std::size_t i) {
  const WorkerSlot& s = slots_[i];
  count_crashed(tables_[0],
                std::string_view(s.crash_route, strnlen(s.crash_route, sizeof s.crash_route)));
}

void Scoreboard::sample(std::uint32_t listen_queue) {
  std::uint32_t active = 0, total = 0;
  for (std::size_t i = 0; i < capacity_; ++i) {
    WorkerState st = slots_[i].state.load(std::memory_order_relaxed);
    if (st == WorkerState::Free || st == WorkerState::Starting) continue;
    ++total;
    active += is_busy(st);
  }
  PoolCounters& p = *pool_;
  if (active > p.max_active.load(std::memory_order_relaxed)) p.max_active = active;
  if (listen_queue > p.max_listen_queue.load(std::memory_order_relaxed))
    p.max_listen_queue = listen_queue;
  bool all_busy = total > 0 && active == total;
  if (all_busy && !p.was_all_busy.load(std::memory_order_relaxed)) ++p.all_busy;
  p.was_all_busy = all_busy;
}

static void copy_truncated(char* dst, std::size_t dst_size, const char* src, std::size_t len) {
  std::size_t n = std::min(len, dst_size - 1);
  std::memcpy(dst, src, n);
  dst[n] = '\0';
}

// A client may send any bytes as its request id: the master writes it into log lines.
static void copy_printable(char* dst, std::size_t dst_size, std::string_view src) {
  std::size_t n = std::min(src.size(), dst_size - 1);
  for (std::size_t i = 0; i < n; ++i) {
    unsigned char c = static_cast<unsigned char>(src[i]);
    dst[i] = c > 0x20 && c < 0x7f ? src[i] : '?';
  }
  dst[n] = '\0';
}

// A seqlock: the counter is odd while the strings change. The strings themselves are plain bytes
// (a reader may copy torn data, which it then discards because the counter moved); the fences
// order them against the counter.
void Scoreboard::set_request(WorkerSlot& s, const char* method, std::size_t method_len,
                             const char* uri, std::size_t uri_len, std::string_view request_id) {
  std::uint32_t seq = s.request_seq.load(std::memory_order_relaxed);
  s.request_seq.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  copy_truncated(s.method, sizeof s.method, method, method_len);
  copy_truncated(s.uri, sizeof s.uri, uri, uri_len);
  copy_printable(s.request_id, sizeof s.request_id, request_id);
  s.request_seq.store(seq + 2, std::memory_order_release);
}

Scoreboard::RequestInfo Scoreboard::read_request(const WorkerSlot& s) {
  RequestInfo info;
  // Bounded: a worker killed in the middle of a write leaves the counter odd for good.
  for (int attempt = 0; attempt < 1000; ++attempt) {
    std::uint32_t before = s.request_seq.load(std::memory_order_acquire);
    std::memcpy(info.method, s.method, sizeof info.method);
    std::memcpy(info.uri, s.uri, sizeof info.uri);
    std::memcpy(info.request_id, s.request_id, sizeof info.request_id);
    std::atomic_thread_fence(std::memory_order_acquire);
    if (before % 2 == 0 && s.request_seq.load(std::memory_order_relaxed) == before) break;
  }
  info.method[sizeof info.method - 1] = '\0';
  info.uri[sizeof info.uri - 1] = '\0';
  info.request_id[sizeof info.request_id - 1] = '\0';
  std::uint64_t prefix = s.id_prefix.load(std::memory_order_relaxed);
  if (info.request_id[0] == '\0' && prefix != 0) {
    format_generated_id(prefix, s.request_number.load(std::memory_order_relaxed), info.request_id);
    info.request_id[kGeneratedIdSize] = '\0';
  }
  return info;
}

} // namespace process_manager
