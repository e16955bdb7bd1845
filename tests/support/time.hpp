#pragma once
// How long something took, for the tests' bounds and messages (steady clock).
#include <chrono>

namespace test_support {

using Clock = std::chrono::steady_clock;

inline double elapsed_ms(Clock::time_point since) {
  return std::chrono::duration<double, std::milli>(Clock::now() - since).count();
}

inline double elapsed_s(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

} // namespace test_support
