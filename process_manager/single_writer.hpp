#pragma once
// Adding to a counter that has one writer (a scoreboard slot's worker) and readers elsewhere (the
// master, the status page): a relaxed load and a relaxed store. A fetch_add would be a locked
// read-modify-write on every request, paid for a race that cannot happen with one writer.
#include <atomic>
#include <cstdint>

namespace process_manager {

inline void single_writer_add(std::atomic<std::uint64_t>& counter, std::uint64_t by) {
  counter.store(counter.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

// The same for a plain field of shared memory (the route tables).
inline void single_writer_add(std::uint64_t& counter, std::uint64_t by) {
  std::atomic_ref<std::uint64_t> a(counter);
  a.store(a.load(std::memory_order_relaxed) + by, std::memory_order_relaxed);
}

} // namespace process_manager
