#pragma once
// Monotonic clock readings in nanoseconds, for the tests of the pure policies (they are given
// "now" rather than reading a clock).
#include <cstdint>

namespace test_support {

inline constexpr std::uint64_t kMs = 1'000'000;
inline constexpr std::uint64_t kS = 1000 * kMs;
// An arbitrary monotonic start, far enough from 0 that no "now - age" of a test wraps.
inline constexpr std::uint64_t kT0 = 1000 * kS;

} // namespace test_support
