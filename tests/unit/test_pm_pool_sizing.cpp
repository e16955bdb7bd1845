// Pool sizing: static, dynamic and ondemand targets, TTIN/TTOU, fitting the pool to its target
// (process_manager/pool_sizing.hpp).
#include "process_manager/pool_sizing.hpp"
#include "support/nanoseconds.hpp"

#include <doctest/doctest.h>

using namespace process_manager;
using namespace std::chrono_literals;

namespace {
using test_support::kS;
using test_support::kT0;

PoolMember member(pid_t pid, WorkerState state, std::uint64_t idle_since = 0,
                  std::uint64_t started = kT0) {
  return PoolMember{pid, state, started, idle_since};
}

PoolSettings dynamic_pool(int workers, int min_spare, int max_spare, int max_workers) {
  PoolSettings p;
  p.mode = PoolMode::Dynamic;
  p.workers = workers;
  p.min_spare = min_spare;
  p.max_spare = max_spare;
  p.max_workers = max_workers;
  return p;
}

PoolSettings on_demand_pool(int workers, int max_workers) {
  PoolSettings p;
  p.mode = PoolMode::OnDemand;
  p.workers = workers;
  p.max_workers = max_workers;
  p.idle_timeout = 10s;
  return p;
}
} // namespace

TEST_CASE("pool sizing: idle since the first turn seen waiting with the same request count") {
  IdleWatch w = watch_idle({}, WorkerState::Idle, 5, kT0);
  CHECK(w.idle_since_ns == kT0);
  w = watch_idle(w, WorkerState::KeepAliveIdle, 5, kT0 + kS); // still idle: the start stays
  CHECK(w.idle_since_ns == kT0);
  w = watch_idle(w, WorkerState::Idle, 6, kT0 + 2 * kS); // served one meanwhile: starts over
  CHECK(w.idle_since_ns == kT0 + 2 * kS);
  w = watch_idle(w, WorkerState::Handling, 6, kT0 + 3 * kS);
  CHECK(w.idle_since_ns == 0);
  CHECK(w.requests_seen == 6);
  CHECK(watch_idle({}, WorkerState::Starting, 0, kT0).idle_since_ns == 0);
}

TEST_CASE("pool sizing: a static pool keeps its count, whatever the load") {
  PoolSettings p;
  p.workers = 3;
  std::vector<PoolMember> all_idle{member(1, WorkerState::Idle, kT0),
                                   member(2, WorkerState::Idle, kT0),
                                   member(3, WorkerState::Idle, kT0)};
  ScaleDecision d = scale_pool(p, all_idle, true, kT0 + 3600 * kS);
  CHECK(d.workers == 3);
  CHECK(d.retire.empty());
}

TEST_CASE("pool sizing: dynamic spawns up to min_spare spares, a starting worker counts as one") {
  PoolSettings p = dynamic_pool(2, 2, 4, 6);
  std::vector<PoolMember> busy{member(1, WorkerState::Handling), member(2, WorkerState::Writing)};
  CHECK(scale_pool(p, busy, false, kT0).workers == 4); // two busy, two spares wanted
  busy.push_back(member(3, WorkerState::Starting));
  p.workers = 3;
  CHECK(scale_pool(p, busy, false, kT0).workers == 4); // one on its way: one more
  p.max_workers = 3;
  CHECK(scale_pool(p, busy, false, kT0).workers == 3); // never above max_workers
}

TEST_CASE("pool sizing: dynamic retires one spare a turn past max_spare, the one idle longest") {
  PoolSettings p = dynamic_pool(4, 1, 2, 8);
  std::vector<PoolMember> idle{
      member(11, WorkerState::Idle, kT0 + 3), member(12, WorkerState::Idle, kT0 + 1),
      member(13, WorkerState::Idle, kT0 + 2), member(14, WorkerState::Idle, kT0 + 1)};
  ScaleDecision d = scale_pool(p, idle, false, kT0 + kS);
  REQUIRE(d.retire.size() == 1);
  CHECK(d.retire[0] == 12); // idle longest; of equals, the first
  CHECK(d.workers == 3);
  idle.pop_back();
  idle.erase(idle.begin() + 1);
  CHECK(scale_pool(p, idle, false, kT0 + kS).retire.empty()); // two spares: within max_spare
}

TEST_CASE("pool sizing: ondemand spawns for a queued connection only with no worker free") {
  PoolSettings p = on_demand_pool(0, 2);
  CHECK(scale_pool(p, {}, true, kT0).workers == 1);
  CHECK(scale_pool(p, {}, false, kT0).workers == 0);
  CHECK(wants_queued_connections(p, {}));
  p.workers = 1;
  std::vector<PoolMember> one{member(1, WorkerState::Starting)};
  CHECK(scale_pool(p, one, true, kT0).workers == 1); // one is starting: it will take it
  CHECK_FALSE(wants_queued_connections(p, one));
  one[0].state = WorkerState::Handling;
  CHECK(scale_pool(p, one, true, kT0).workers == 2);
  CHECK(wants_queued_connections(p, one));
  one.push_back(member(2, WorkerState::Handling));
  CHECK(scale_pool(p, one, true, kT0).workers == 1); // at max_workers: no more
  CHECK_FALSE(wants_queued_connections(p, one));
}

TEST_CASE("pool sizing: ondemand stops the workers idle longer than idle_timeout") {
  PoolSettings p = on_demand_pool(3, 3);
  std::vector<PoolMember> m{member(1, WorkerState::Idle, kT0),
                            member(2, WorkerState::Idle, kT0 + 5 * kS),
                            member(3, WorkerState::Handling, 0)};
  ScaleDecision d = scale_pool(p, m, false, kT0 + 10 * kS);
  CHECK(d.retire.empty()); // exactly idle_timeout: not yet
  d = scale_pool(p, m, false, kT0 + 11 * kS);
  CHECK(d.retire == std::vector<pid_t>{1});
  CHECK(d.workers == 2);
  d = scale_pool(p, m, false, kT0 + 16 * kS);
  CHECK(d.retire == std::vector<pid_t>{1, 2});
  CHECK(d.workers == 1);
}

TEST_CASE("pool sizing: too many gives up held slots first, then retires the newest workers") {
  std::vector<PoolMember> m{
      member(1, WorkerState::Idle, 0, kT0 + 1), member(2, WorkerState::Idle, 0, kT0 + 3),
      member(3, WorkerState::Idle, 0, kT0 + 2), member(4, WorkerState::Idle, 0, kT0 + 3)};
  FitDecision d = fit_to_target(1, 2, m);
  CHECK(d.release_held == 2);
  CHECK(d.retire == std::vector<pid_t>{2, 4, 3}); // newest first; of equals, the first
  CHECK(d.spawn == 0);
  d = fit_to_target(5, 1, m); // four and a held slot: the target
  CHECK(d.release_held == 0);
  CHECK(d.retire.empty());
  CHECK(d.spawn == 0);
  d = fit_to_target(7, 1, m);
  CHECK(d.spawn == 2);
}

TEST_CASE("pool sizing: TTIN and TTOU change the count of a static pool, the most of the others") {
  PoolSettings p;
  p.workers = 2;
  CHECK(grow_by_one(p) == 3);
  CHECK(p.workers == 3);
  CHECK(shrink_by_one(p) == 2);
  CHECK(shrink_by_one(p) == 1);
  CHECK(shrink_by_one(p) == 1); // never below one
  CHECK(resize_to(p, 0) == 1);
  CHECK(resize_to(p, 5) == 5);
  CHECK_FALSE(sized_by_maximum(p));

  PoolSettings d = dynamic_pool(4, 1, 3, 6);
  CHECK(sized_by_maximum(d));
  CHECK(grow_by_one(d) == 7);
  CHECK(d.workers == 4);
  CHECK(resize_to(d, 2) == 2);
  CHECK(d.workers == 2); // the target follows the maximum down
  CHECK(shrink_by_one(d) == 1);
  CHECK(d.workers == 1);
}

TEST_CASE("pool sizing: a generation is ready with its count, every worker out of Starting") {
  std::vector<PoolMember> m{member(1, WorkerState::Idle), member(2, WorkerState::Starting)};
  CHECK_FALSE(generation_ready(2, m));
  m[1].state = WorkerState::Handling;
  CHECK(generation_ready(2, m));
  CHECK_FALSE(generation_ready(3, m)); // one still to spawn
  CHECK(generation_ready(0, {}));
  CHECK_FALSE(is_ready(WorkerState::Free));
}
