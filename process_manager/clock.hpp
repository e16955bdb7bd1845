#pragma once
// The clock every room counts in, and the two conversions around it: a configured duration to
// ns, and ns to the seconds a log line or a status page shows.
//
// CLOCK_MONOTONIC is served by the vDSO on Linux: no system call, safe on the request path.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <time.h>

namespace process_manager {

inline std::uint64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u +
         static_cast<std::uint64_t>(ts.tv_nsec);
}

// A duration (an option's milliseconds, a policy's seconds) in the ns of monotonic_ns(); a
// negative one is 0.
template <class Rep, class Period>
constexpr std::uint64_t ns(std::chrono::duration<Rep, Period> d) {
  auto n = std::chrono::duration_cast<std::chrono::nanoseconds>(d).count();
  return n > 0 ? static_cast<std::uint64_t>(n) : 0;
}

// ns as seconds with `decimals` digits after the point: "1.234567" (status pages).
inline std::string seconds_number(std::uint64_t ns, int decimals) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, static_cast<double>(ns) / 1e9);
  return buf;
}

// ns as seconds for a log line: "1.2 s" (decimals 1), "0.250 s" (decimals 3).
inline std::string seconds_text(std::uint64_t ns, int decimals = 1) {
  return seconds_number(ns, decimals) + " s";
}

} // namespace process_manager
