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
#include <unistd.h>

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

std::uint32_t busy_threads(const WorkerSlot& s) {
  std::size_t threads = s.thread_count();
  if (threads <= 1) return is_busy(s.state.load(std::memory_order_relaxed)) ? 1 : 0;
  std::uint32_t busy = 0;
  for (std::size_t t = 0; t < threads; ++t)
    busy += is_busy(s.request(t).state.load(std::memory_order_relaxed));
  return busy;
}

namespace {

std::size_t page_size() {
  static const std::size_t size = static_cast<std::size_t>(sysconf(_SC_PAGESIZE));
  return size;
}

std::size_t round_up(std::size_t n, std::size_t to) {
  return (n + to - 1) / to * to;
}

} // namespace

Scoreboard::Scoreboard(std::size_t capacity, std::size_t threads, HostArea host)
    : capacity_(capacity), threads_(std::max<std::size_t>(threads, 1)), host_(host) {
  // A region: the worker's slot, its request slots, the host's area; whole pages, so that a
  // worker can protect the others' regions from itself.
  host_offset_ = round_up(sizeof(WorkerSlot) + threads_ * sizeof(RequestSlot), 64);
  stride_ = round_up(host_offset_ + host_.size, page_size());
  const std::size_t retired_offset = round_up(sizeof(PoolCounters), 64);
  head_size_ = round_up(retired_offset + host_.size, page_size());
  map_size_ = head_size_ + capacity_ * stride_;
  // MAP_SHARED|MAP_ANONYMOUS: every worker forked later sees the same pages. Nothing is
  // constructed in the regions: zero-filled pages are free slots and empty host areas, and
  // prepare() readies a region when a worker gets it.
  void* p = mmap(nullptr, map_size_, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED)
    throw std::system_error(errno, std::generic_category(),
                            "mmap(scoreboard of " + std::to_string(capacity) + " slots) failed");
  map_ = p;
  pool_ = new (p) PoolCounters;
  retired_ = static_cast<char*>(p) + retired_offset;
  regions_ = static_cast<char*>(p) + head_size_;
  timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  pool_->start_time_s = static_cast<std::uint64_t>(now.tv_sec);
  pool_->start_ns = monotonic_ns();
}

Scoreboard::~Scoreboard() {
  // The slots are trivially destructible (atomics and char arrays): unmapping is enough.
  munmap(map_, map_size_);
}

void Scoreboard::prepare(std::size_t i, std::uint32_t threads) {
  // The region's worker is gone (or never was): nobody else writes it now.
  WorkerSlot& s = *new (&slot(i)) WorkerSlot;
  s.threads = std::clamp<std::uint32_t>(threads, 1, static_cast<std::uint32_t>(threads_));
  for (std::size_t t = 0; t < threads_; ++t)
    new (&s.request(t)) RequestSlot;
  std::uint32_t used = pool_->slots_used.load(std::memory_order_relaxed);
  if (i + 1 > used)
    pool_->slots_used.store(static_cast<std::uint32_t>(i + 1), std::memory_order_release);
}

bool Scoreboard::protect_others(std::size_t own) {
  char* base = static_cast<char*>(map_);
  char* mine = region(own);
  if (mprotect(base, static_cast<std::size_t>(mine - base), PROT_READ) != 0) return false;
  char* after = mine + stride_;
  std::size_t rest = static_cast<std::size_t>(base + map_size_ - after);
  return rest == 0 || mprotect(after, rest, PROT_READ) == 0;
}

void Scoreboard::retire(std::size_t i) {
  WorkerSlot& s = slot(i);
  PoolCounters& p = *pool_;
  std::uint32_t seq = p.retire_seq.load(std::memory_order_relaxed);
  p.retire_seq.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  p.retired_requests += s.requests.exchange(0);
  s.connections.store(0, std::memory_order_relaxed);
  for (std::size_t t = 0; t < threads_; ++t) {
    s.request(t).state.store(WorkerState::Free, std::memory_order_relaxed);
    s.request(t).request_start_ns.store(0, std::memory_order_relaxed);
  }
  if (host_.retire) host_.retire(retired_, host_area(i));
  p.retire_seq.store(seq + 2, std::memory_order_release);
}

void Scoreboard::count_crashed_request(std::size_t i) {
  if (!host_.count_crashed) return;
  const WorkerSlot& s = slot(i);
  std::int32_t t = s.crash_thread.load(std::memory_order_relaxed);
  const RequestSlot& r = s.request(t >= 0 && static_cast<std::size_t>(t) < threads_ ? t : 0);
  host_.count_crashed(retired_, std::string_view(r.route, strnlen(r.route, sizeof r.route)));
}

void Scoreboard::sample(std::uint32_t listen_queue) {
  std::uint32_t active = 0, busy = 0, total = 0;
  for (std::size_t i = 0; i < used(); ++i) {
    const WorkerSlot& s = slot(i);
    WorkerState st = s.state.load(std::memory_order_relaxed);
    if (st == WorkerState::Free || st == WorkerState::Starting) continue;
    total += static_cast<std::uint32_t>(s.thread_count());
    const std::uint32_t threads_busy = busy_threads(s);
    busy += threads_busy;
    active += threads_busy > 0; // a process, however many of its threads serve
  }
  PoolCounters& p = *pool_;
  if (active > p.max_active.load(std::memory_order_relaxed)) p.max_active = active;
  if (busy > p.max_busy_threads.load(std::memory_order_relaxed)) p.max_busy_threads = busy;
  if (listen_queue > p.max_listen_queue.load(std::memory_order_relaxed))
    p.max_listen_queue = listen_queue;
  bool all_busy = total > 0 && busy == total;
  if (all_busy && !p.was_all_busy.load(std::memory_order_relaxed)) ++p.all_busy;
  p.was_all_busy = all_busy;
}

static void copy_truncated(char* dst, std::size_t dst_size, const char* src, std::size_t len) {
  std::size_t n = std::min(len, dst_size - 1);
  if (n > 0) std::memcpy(dst, src, n); // a request without REQUEST_URI has no pointer at all
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
void Scoreboard::set_request(RequestSlot& s, const char* method, std::size_t method_len,
                             const char* uri, std::size_t uri_len, std::string_view request_id) {
  std::uint32_t seq = s.request_seq.load(std::memory_order_relaxed);
  s.request_seq.store(seq + 1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_release);
  copy_truncated(s.method, sizeof s.method, method, method_len);
  copy_truncated(s.uri, sizeof s.uri, uri, uri_len);
  copy_printable(s.request_id, sizeof s.request_id, request_id);
  s.request_seq.store(seq + 2, std::memory_order_release);
}

Scoreboard::RequestInfo Scoreboard::read_request(const WorkerSlot& w, std::size_t thread) {
  const RequestSlot& s = w.request(thread);
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
  std::uint64_t prefix = w.id_prefix.load(std::memory_order_relaxed);
  if (info.request_id[0] == '\0' && prefix != 0) {
    format_generated_id(prefix, s.request_number.load(std::memory_order_relaxed), info.request_id);
    info.request_id[kGeneratedIdSize] = '\0';
  }
  return info;
}

} // namespace process_manager
