// When the worker's fast path tries accept4 before waiting (fcgi_host/worker/accept_probe.hpp).
#include "fcgi_host/worker/accept_probe.hpp"

#include <doctest/doctest.h>

using fcgi_host::AcceptProbe;

namespace {
// How many of the next `n` chances the probe takes, when every try finds the queue empty.
unsigned tries_in(AcceptProbe& p, unsigned n) {
  unsigned tries = 0;
  for (unsigned i = 0; i < n; ++i) {
    if (!p.try_now()) continue;
    ++tries;
    p.found(false);
  }
  return tries;
}
} // namespace

TEST_CASE("accept probe: while connections are queued, every chance is a try") {
  AcceptProbe p;
  for (int i = 0; i < 100; ++i) {
    REQUIRE(p.try_now());
    p.found(true);
  }
}

TEST_CASE("accept probe: after an empty try, the tries space out, doubling up to 32") {
  AcceptProbe p;
  REQUIRE(p.try_now());
  p.found(false);
  unsigned skipped = 0;
  for (unsigned expected_gap : {1u, 2u, 4u, 8u, 16u, 32u, 32u}) {
    skipped = 0;
    while (!p.try_now())
      ++skipped;
    CHECK(skipped == expected_gap);
    p.found(false);
  }
}

TEST_CASE("accept probe: a closed loop of one client pays an empty try rarely") {
  AcceptProbe p;
  tries_in(p, 100); // settled at the longest gap
  CHECK(tries_in(p, 33 * 10) == 10);
}

TEST_CASE("accept probe: a try that finds a connection restores the fast path at once") {
  AcceptProbe p;
  tries_in(p, 200);
  while (!p.try_now()) {}
  p.found(true);
  CHECK(p.try_now());
  p.found(true);
  CHECK(p.try_now());
}
