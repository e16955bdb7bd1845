// Reload by generations: which configuration is current, kept, restored
// (process_manager/generations.hpp).
#include "process_manager/generations.hpp"
#include "support/nanoseconds.hpp"

#include <doctest/doctest.h>

using namespace process_manager;
using namespace std::chrono_literals;

namespace {
using test_support::kS;

// A generation told apart by its worker count.
Generation with_workers(int n, std::chrono::milliseconds reload_grace = 0ms) {
  Generation g;
  g.pool.workers = n;
  g.pool.graceful_timeout = 30s;
  g.pool.reload_grace = reload_grace;
  return g;
}
} // namespace

TEST_CASE("generations: a reload numbers the new one, keeps the old until it is ready") {
  Generations g(with_workers(2));
  CHECK(g.current_number() == 1);
  CHECK(g.ready_number() == 0);
  g.mark_current_ready();
  g.begin(with_workers(3), 100 * kS);
  CHECK(g.current_number() == 2);
  CHECK(g.previous_number() == 1);
  CHECK(g.current().pool.workers == 3);
  CHECK_FALSE(g.deadline_passed(129 * kS));
  CHECK(g.deadline_passed(130 * kS)); // the new generation's graceful_timeout
  g.complete(110 * kS);
  CHECK(g.ready_number() == 2);
  CHECK_FALSE(g.in_grace(2, 110 * kS)); // no reload grace: nothing kept
  g.begin(with_workers(4), 200 * kS);
  CHECK(g.current_number() == 3);
}

TEST_CASE("generations: an abandoned reload brings the previous one back, numbers go on") {
  Generations g(with_workers(2));
  g.begin(with_workers(5), 0);
  g.abandon();
  CHECK(g.current_number() == 1);
  CHECK(g.current().pool.workers == 2);
  g.begin(with_workers(6), 0);
  CHECK(g.current_number() == 3); // 2 was the abandoned one
}

TEST_CASE("generations: an ondemand generation starts with no worker") {
  Generation first = with_workers(4);
  first.pool.mode = PoolMode::OnDemand;
  Generations g(first);
  CHECK(g.current().pool.workers == 0);
  g.begin(first, 0);
  CHECK(g.current().pool.workers == 0);
}

TEST_CASE("generations: with a reload grace, the third crash brings the old configuration back") {
  Generations g(with_workers(2));
  g.begin(with_workers(3, 60s), 0);
  g.complete(10 * kS);
  CHECK(g.in_grace(2, 11 * kS));
  CHECK_FALSE(g.in_grace(1, 11 * kS));
  CHECK_FALSE(g.crash_undoes_reload(2, 11 * kS));
  CHECK_FALSE(g.crash_undoes_reload(2, 12 * kS));
  CHECK(g.crash_undoes_reload(2, 13 * kS));
  Generations::Undo undo = g.go_back(13 * kS);
  CHECK(undo.undone == 2);
  CHECK(undo.restored == 1);
  CHECK(g.current_number() == 3); // a new generation, with generation 1's configuration
  CHECK(g.current().pool.workers == 2);
  CHECK(g.previous_number() == 2);
  CHECK_FALSE(g.in_grace(3, 14 * kS));
}

TEST_CASE("generations: once the grace is over, the old configuration is dropped") {
  Generations g(with_workers(2));
  g.begin(with_workers(3, 5s), 0);
  g.complete(0);
  g.end_grace_if_over(4 * kS);
  CHECK(g.in_grace(2, 4 * kS));
  g.end_grace_if_over(5 * kS);
  CHECK_FALSE(g.in_grace(2, 4 * kS));
  CHECK_FALSE(g.crash_undoes_reload(2, 4 * kS));
}

TEST_CASE("generations: a HUP during a reload is queued once") {
  Generations g(with_workers(1));
  CHECK_FALSE(g.take_queued_reload());
  g.queue_reload();
  g.queue_reload();
  CHECK(g.take_queued_reload());
  CHECK_FALSE(g.take_queued_reload());
  g.queue_reload();
  g.forget_queued_reload(); // a stop cancels it
  CHECK_FALSE(g.take_queued_reload());
}
