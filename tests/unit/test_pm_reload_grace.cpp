// --reload-grace: when a reload is undone (process_manager/reload_grace.hpp).
#include "process_manager/reload_grace.hpp"

#include <doctest/doctest.h>

using process_manager::ReloadGrace;
using namespace std::chrono_literals;

namespace {
constexpr std::uint64_t kSecond = 1'000'000'000;
}

TEST_CASE("reload grace: the third crash of the new generation within the grace undoes it") {
  ReloadGrace g;
  CHECK(g.over(0)); // nothing watched yet
  g.start(2, 10 * kSecond, 5s);
  CHECK(g.watching(2, 10 * kSecond));
  CHECK_FALSE(g.over(11 * kSecond));
  CHECK_FALSE(g.on_crash(1, 11 * kSecond)); // another generation's crash does not count
  CHECK_FALSE(g.on_crash(2, 11 * kSecond));
  CHECK_FALSE(g.on_crash(2, 12 * kSecond));
  CHECK(g.on_crash(2, 13 * kSecond)); // the third: go back, once
  CHECK_FALSE(g.on_crash(2, 13 * kSecond));
  CHECK(g.over(13 * kSecond));
}

TEST_CASE("reload grace: crashes after the grace, or spread past it, undo nothing") {
  ReloadGrace g;
  g.start(3, 0, 2s);
  CHECK_FALSE(g.on_crash(3, 1 * kSecond));
  CHECK_FALSE(g.on_crash(3, 1 * kSecond + 1));
  CHECK_FALSE(g.on_crash(3, 2 * kSecond)); // the grace is over at its end
  CHECK(g.over(2 * kSecond));
  CHECK_FALSE(g.watching(3, 2 * kSecond));
  g.start(4, 10 * kSecond, 1s); // the next reload starts over
  CHECK(g.crashes() == 0);
  CHECK(g.watching(4, 10 * kSecond));
}
