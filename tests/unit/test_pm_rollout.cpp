// --rollout canary: the judgement of a window's figures, its p99, and the window's tally
// (process_manager/rollout.hpp).
#include "process_manager/rollout.hpp"

#include <doctest/doctest.h>

#include <vector>

using process_manager::judge;
using process_manager::RolloutSettings;
using process_manager::RolloutWindow;
using process_manager::ServedFigures;
using process_manager::Verdict;

namespace {

// The host's bounds, in ms: 1, 2.5, 5, 10, 25, 50, 100 (then open).
const std::vector<std::uint64_t> kRolloutTestBounds = {
    1'000'000, 2'500'000, 5'000'000, 10'000'000, 25'000'000, 50'000'000, 100'000'000};

// `requests` requests, `errors` of them 5xx, all in bucket `bucket`.
ServedFigures rollout_figures_in(std::uint64_t requests, std::uint64_t errors, std::size_t bucket) {
  ServedFigures f;
  f.requests = requests;
  f.errors = errors;
  f.buckets[bucket] = requests;
  return f;
}

} // namespace

TEST_CASE("rollout: p99 is interpolated inside its bucket, 0 without requests") {
  CHECK(process_manager::p99_ns(ServedFigures{}, kRolloutTestBounds) == 0);
  ServedFigures f = rollout_figures_in(100, 0, 0); // all under 1 ms
  CHECK(process_manager::p99_ns(f, kRolloutTestBounds) == 990'000);
  f.buckets[0] = 98; // two requests in 25..50 ms: the 99th is the first of them
  f.buckets[5] = 2;
  std::uint64_t p99 = process_manager::p99_ns(f, kRolloutTestBounds);
  CHECK(p99 > 25'000'000);
  CHECK(p99 <= 50'000'000);
}

TEST_CASE("rollout: a canary answering 5xx more often than the old generation is undone") {
  RolloutSettings rule; // 0.02, 2
  Verdict v = judge(rollout_figures_in(214, 71, 0), rollout_figures_in(1000, 0, 0), rule,
                    kRolloutTestBounds, false);
  CHECK(v.kind == Verdict::Kind::Undo);
  CHECK(v.figures == "5xx 33.2% against 0.0% over 214 requests (1000 on the old generation)");
  // Within the ratio: promoted.
  v = judge(rollout_figures_in(200, 5, 0), rollout_figures_in(1000, 10, 0), rule,
            kRolloutTestBounds, false);
  CHECK(v.kind == Verdict::Kind::Promote);
}

TEST_CASE("rollout: a canary past the latency factor is undone, not one within the floor") {
  RolloutSettings rule;
  Verdict v = judge(rollout_figures_in(200, 0, 5), rollout_figures_in(1000, 0, 1), rule,
                    kRolloutTestBounds, false);
  CHECK(v.kind == Verdict::Kind::Undo);
  CHECK(v.figures.starts_with("p99 49.8 ms against 2.5 ms"));
  // 2.5 ms against 1 ms: more than twice, but within kLatencyFloorNs of it.
  v = judge(rollout_figures_in(200, 0, 1), rollout_figures_in(1000, 0, 0), rule, kRolloutTestBounds,
            false);
  CHECK(v.kind == Verdict::Kind::Promote);
}

TEST_CASE("rollout: too few requests wait, then the errors decide alone") {
  RolloutSettings rule;
  ServedFigures few_slow = rollout_figures_in(10, 0, 6);
  ServedFigures old = rollout_figures_in(1000, 0, 0);
  CHECK(judge(few_slow, old, rule, kRolloutTestBounds, false).kind == Verdict::Kind::Wait);
  CHECK(judge(few_slow, old, rule, kRolloutTestBounds, true).kind == Verdict::Kind::Promote);
  ServedFigures few_failing = rollout_figures_in(10, 2, 0);
  CHECK(judge(few_failing, old, rule, kRolloutTestBounds, true).kind == Verdict::Kind::Undo);
}

TEST_CASE("rollout: the window counts from each worker's baseline and keeps what exited") {
  RolloutWindow w;
  w.start();
  w.set_baseline(10, rollout_figures_in(500, 3, 0));
  CHECK(w.since_start(10, rollout_figures_in(520, 4, 0)).requests == 20);
  CHECK(w.since_start(10, rollout_figures_in(520, 4, 0)).errors == 1);
  CHECK(w.since_start(11, rollout_figures_in(7, 0, 0)).requests == 7); // spawned later
  w.on_exit(10, false, rollout_figures_in(530, 4, 0));
  CHECK(w.gone(false).requests == 30);
  CHECK(w.gone(true).requests == 0);
  w.start();
  CHECK(w.gone(false).requests == 0);
}

TEST_CASE("rollout: canary and step sizes leave an old worker and step at least one") {
  RolloutSettings rule;
  CHECK(process_manager::canary_count(rule, 1) == 0); // no room for a canary
  CHECK(process_manager::canary_count(rule, 6) == 1);
  rule.canary_workers = 9;
  CHECK(process_manager::canary_count(rule, 6) == 5);
  CHECK(process_manager::step_count(rule, 6) == 1);
  CHECK(process_manager::step_count(rule, 12) == 3);
  rule.step = 2;
  CHECK(process_manager::step_count(rule, 12) == 2);
}
