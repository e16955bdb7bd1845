#include "process_manager/backoff.hpp"

#include <doctest/doctest.h>

using namespace process_manager;

namespace {
constexpr std::uint64_t kMs = 1'000'000;
constexpr std::uint64_t kS = 1000 * kMs;
constexpr std::uint64_t kT0 = 1000 * kS; // an arbitrary monotonic start
} // namespace

TEST_CASE("backoff: delay doubles from 100 ms, capped at 5 s") {
  CrashPolicy p;
  std::uint64_t t = kT0;
  std::uint64_t expected[] = {100, 200, 400, 800, 1600, 3200, 5000, 5000};
  for (std::uint64_t ms : expected) {
    CHECK(p.on_crash(t).respawn_at_ns - t == ms * kMs);
    t += 1200 * kMs; // slow enough never to trip the breaker
  }
}

TEST_CASE("backoff: resets after 10 s without a crash") {
  CrashPolicy p;
  p.on_crash(kT0);
  p.on_crash(kT0 + 1 * kS);
  CHECK(p.on_crash(kT0 + 2 * kS).respawn_at_ns == kT0 + 2 * kS + 400 * kMs);
  std::uint64_t later = kT0 + 12 * kS + 1;
  CHECK(p.on_crash(later).respawn_at_ns == later + 100 * kMs);
}

TEST_CASE("backoff: the breaker trips once, pauses 10 s, and is logged once") {
  CrashPolicy p;
  int trips = 0, lines = 0;
  std::uint64_t suppressed = 0;
  CrashPolicy::Decision d;
  // 30 crashes, 10 ms apart: a storm.
  for (int i = 0; i < 30; ++i) {
    d = p.on_crash(kT0 + i * 10 * kMs);
    trips += d.breaker_tripped;
    if (i == 10) {
      CHECK(d.breaker_tripped); // the 11th crash is "more than 10"
      CHECK(d.respawn_at_ns == kT0 + i * 10 * kMs + 10 * kS);
    }
    lines += d.log;
    suppressed += d.suppressed;
  }
  CHECK(trips == 1);
  CHECK(lines == 1); // all within one second: one line
  CHECK(suppressed == 0);

  // The next crash a second later writes a line that says how many were suppressed.
  d = p.on_crash(kT0 + 2 * kS);
  CHECK(d.log);
  CHECK(d.suppressed == 29);
  CHECK_FALSE(d.breaker_tripped); // still paused: no second breaker line
  CHECK(d.respawn_at_ns == kT0 + 100 * kMs + 10 * kS);
}

TEST_CASE("backoff: the breaker can trip again after its pause") {
  CrashPolicy p;
  int trips = 0;
  for (int i = 0; i < 11; ++i)
    trips += p.on_crash(kT0 + i * kMs).breaker_tripped;
  for (int i = 0; i < 11; ++i)
    trips += p.on_crash(kT0 + 11 * kS + i * kMs).breaker_tripped;
  CHECK(trips == 2);
}
