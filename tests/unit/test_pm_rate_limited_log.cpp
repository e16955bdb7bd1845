#include "process_manager/rate_limited_log.hpp"
#include "support/nanoseconds.hpp"

#include <doctest/doctest.h>

using process_manager::RateLimitedLog;

namespace {
using test_support::kS;
}

TEST_CASE("rate-limited log: a burst passes, then lines are held and counted when due") {
  RateLimitedLog log(RateLimitedLog::Rate{3, 6 * kS, 1 * kS, 5 * kS});
  std::uint64_t t = 100 * kS;
  int written = 0;
  for (int i = 0; i < 10; ++i)
    written += log.allow(t);
  CHECK(written == 3);
  CHECK(log.due_ns() == t + 1 * kS); // the first count a second after the first held line
  // One token back after the refill period, not before.
  CHECK_FALSE(log.allow(t + 5 * kS));
  CHECK(log.allow(t + 6 * kS));
  CHECK(log.take_held() == 8);
  CHECK(log.due_ns() == 0);
}

TEST_CASE("rate-limited log: while a flood goes on, counts come every next_count") {
  RateLimitedLog log(RateLimitedLog::Rate{1, 60 * kS, 1 * kS, 5 * kS});
  std::uint64_t t = 10 * kS;
  CHECK(log.allow(t));
  CHECK_FALSE(log.allow(t));
  log.flush_due(t + 1 * kS, process_manager::LogLevel::Debug, "test lines");
  CHECK(log.due_ns() == 0);
  CHECK_FALSE(log.allow(t + 2 * kS));
  CHECK(log.due_ns() == t + 2 * kS + 5 * kS);
}
