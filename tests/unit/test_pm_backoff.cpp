#include "process_manager/backoff.hpp"
#include "support/nanoseconds.hpp"

#include <doctest/doctest.h>

using namespace process_manager;

namespace {
using test_support::kMs;
using test_support::kS;
using test_support::kT0;
constexpr std::uint64_t kYoung = 50 * kMs;
constexpr std::uint64_t kOld = 30 * kS;
} // namespace

TEST_CASE("backoff: a slot whose workers die young waits 0, then 100 ms doubling to 5 s") {
  CrashPolicy p;
  std::uint64_t t = kT0;
  std::uint64_t expected[] = {0, 100, 200, 400, 800, 1600, 3200, 5000, 5000};
  for (std::uint64_t ms : expected) {
    CHECK(p.on_crash(0, kYoung, t).respawn_at_ns - t == ms * kMs);
    t += 1200 * kMs; // slow enough never to trip the breaker
  }
}

TEST_CASE("backoff: a worker that lived past 1 s is replaced at once and resets its slot") {
  CrashPolicy p;
  p.on_crash(0, kYoung, kT0);
  CHECK(p.on_crash(0, kYoung, kT0 + 1 * kS).respawn_at_ns == kT0 + 1 * kS + 100 * kMs);
  CHECK(p.on_crash(0, kYoung, kT0 + 2 * kS).respawn_at_ns == kT0 + 2 * kS + 200 * kMs);
  CHECK(p.on_crash(0, kOld, kT0 + 3 * kS).respawn_at_ns == kT0 + 3 * kS);
  CHECK(p.on_crash(0, kYoung, kT0 + 4 * kS).respawn_at_ns == kT0 + 4 * kS); // a new streak
}

TEST_CASE("backoff: each slot backs off on its own") {
  CrashPolicy p;
  for (int i = 0; i < 5; ++i)
    p.on_crash(0, kYoung, kT0 + i * 1200 * kMs);
  std::uint64_t t = kT0 + 6 * kS;
  CHECK(p.on_crash(0, kYoung, t).respawn_at_ns - t == 1600 * kMs);
  CHECK(p.on_crash(1, kYoung, t).respawn_at_ns == t);
  CHECK(p.on_crash(2, kOld, t).respawn_at_ns == t);
  CHECK(p.pool_respawn_at_ns() <= t);
}

TEST_CASE("backoff: random kills of healthy workers never delay or trip anything") {
  CrashPolicy p;
  int trips = 0;
  for (int i = 0; i < 200; ++i) { // 4 slots, one killed every 0.5 s, each lived 2 s
    std::uint64_t t = kT0 + static_cast<std::uint64_t>(i) * 500 * kMs;
    CrashPolicy::Decision d = p.on_crash(static_cast<std::size_t>(i % 4), 2 * kS, t);
    CHECK(d.respawn_at_ns == t);
    trips += d.breaker_tripped;
  }
  CHECK(trips == 0);
}

TEST_CASE("backoff: the breaker trips once on young deaths, pauses 10 s, and is logged once") {
  CrashPolicy p;
  int trips = 0, lines = 0;
  CrashPolicy::Decision d;
  // 30 young deaths in 30 slots, 10 ms apart: a storm no single slot's backoff slows down.
  for (int i = 0; i < 30; ++i) {
    d = p.on_crash(static_cast<std::size_t>(i), kYoung, kT0 + i * 10 * kMs);
    trips += d.breaker_tripped;
    if (i == 10) {
      CHECK(d.breaker_tripped); // the 11th is "more than 10"
      CHECK(d.respawn_at_ns == kT0 + i * 10 * kMs + 10 * kS);
      CHECK(p.pool_respawn_at_ns() == kT0 + i * 10 * kMs + 10 * kS);
    }
    lines += d.log;
  }
  CHECK(trips == 1);
  CHECK(lines == 3); // all within one second: the first three of the burst
  // The count of the others is due a second after the first held back (the 4th, at 30 ms),
  // on the master's timer, not with the next crash.
  CHECK(p.held_count_due_ns() == kT0 + 30 * kMs + kS);
  CHECK(p.take_held_count(kT0 + kS) == 0); // not due yet
  CHECK(p.take_held_count(kT0 + 30 * kMs + kS) == 27);
  CHECK(p.held_count_due_ns() == 0);

  // The next crash a second later writes its own line, with no count in it.
  d = p.on_crash(0, kYoung, kT0 + 2 * kS);
  CHECK(d.log);
  CHECK_FALSE(d.breaker_tripped); // still paused: no second breaker line
  CHECK(d.respawn_at_ns == kT0 + 100 * kMs + 10 * kS);
}

TEST_CASE("backoff: a crash whose request was captured always has its line") {
  CrashPolicy p;
  int lines = 0;
  for (int i = 0; i < 10; ++i)
    lines += p.on_crash(static_cast<std::size_t>(i), 2 * kS, kT0 + i * kMs, i % 2 == 0).log;
  CHECK(lines == 5 + 3); // every captured one, and the first three of the others
  CHECK(p.take_held_count(kT0 + 2 * kS) == 2);
  CHECK(p.lines_due(kT0 + 2 * kS + kMs) == 2); // one a second since the first (at 1 ms)
}

TEST_CASE("backoff: the debugger's turns are one a second, whatever the lines") {
  CrashPolicy p;
  CHECK(p.take_stack_turn(kT0));
  CHECK_FALSE(p.take_stack_turn(kT0 + 500 * kMs));
  CHECK(p.lines_due(kT0 + 500 * kMs) == 3); // the lines have their own rate
  CHECK(p.take_stack_turn(kT0 + kS));
}

TEST_CASE("backoff: the breaker can trip again after its pause") {
  CrashPolicy p;
  int trips = 0;
  for (int i = 0; i < 11; ++i)
    trips += p.on_crash(0, kYoung, kT0 + i * kMs).breaker_tripped;
  for (int i = 0; i < 11; ++i)
    trips += p.on_crash(0, kYoung, kT0 + 11 * kS + i * kMs).breaker_tripped;
  CHECK(trips == 2);
}

TEST_CASE("backoff: failed spawns hold the whole pool back, doubling") {
  CrashPolicy p;
  CHECK(p.on_spawn_failure(kT0).respawn_at_ns == kT0 + 100 * kMs);
  CHECK(p.pool_respawn_at_ns() == kT0 + 100 * kMs);
  CHECK(p.on_spawn_failure(kT0 + 200 * kMs).respawn_at_ns == kT0 + 300 * kMs);
  CHECK(p.on_spawn_failure(kT0 + 400 * kMs).respawn_at_ns == kT0 + 600 * kMs);
}

TEST_CASE("backoff: give_up_after gives a slot up at its Nth young death in a row, never before") {
  CrashPolicy::Settings s;
  s.give_up_after = 6;
  CrashPolicy p(s);
  std::uint64_t t = kT0;
  for (int death = 1; death <= 5; ++death) {
    CrashPolicy::Decision d = p.on_crash(0, kYoung, t);
    CHECK_FALSE(d.give_up);
    CHECK(d.young_deaths == static_cast<std::uint64_t>(death));
    t = d.respawn_at_ns + kYoung;
  }
  CHECK(p.on_crash(1, kYoung, t).young_deaths == 1); // another slot counts on its own
  CrashPolicy::Decision sixth = p.on_crash(0, kYoung, t);
  CHECK(sixth.give_up);
  CHECK(sixth.young_deaths == 6);
}

TEST_CASE("backoff: a death after a long life ends the streak that give_up_after counts") {
  CrashPolicy::Settings s;
  s.give_up_after = 3;
  CrashPolicy p(s);
  p.on_crash(0, kYoung, kT0);
  p.on_crash(0, kYoung, kT0 + 100 * kMs);
  CHECK(p.on_crash(0, kOld, kT0 + 31 * kS).young_deaths == 0);
  CHECK_FALSE(p.on_crash(0, kYoung, kT0 + 32 * kS).give_up);
  CHECK_FALSE(CrashPolicy{}.on_crash(0, kYoung, kT0).give_up); // 0: never
}
