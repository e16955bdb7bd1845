#pragma once
// CLOCK_MONOTONIC is served by the vDSO on Linux: no system call, safe on the request path.
#include <cstdint>
#include <time.h>

namespace process_manager {

inline std::uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

} // namespace process_manager
