#pragma once
// --rollout canary: a reload meets a share of the traffic first. The new generation starts on a
// few workers beside the old one; both are watched over a window, from their own workers'
// figures (requests, 5xx, a duration histogram: what each worker already counts per route,
// summed by the master from the slots, so the request path does no more work); then the new one
// is promoted (the old workers replaced a step at a time) or undone (the old one refills).
//
// Pure: fed with figures and monotonic times, unit-tested without processes; the master starts
// and stops the workers (master_rollout.cpp).
#include "process_manager/pool_settings.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <sys/types.h>

namespace process_manager {

// Room for the host's latency buckets (its upper bounds go in MasterOptions; one more bucket
// takes the rest).
inline constexpr std::size_t kFigureBuckets = 16;

// What workers served: requests, those answered 5xx, their durations by bucket (not cumulative).
struct ServedFigures {
  std::uint64_t requests = 0;
  std::uint64_t errors = 0;
  std::array<std::uint64_t, kFigureBuckets> buckets{};

  ServedFigures& operator+=(const ServedFigures& o);
  // Since `base` (a counter never goes back; a slot reused by another worker starts at 0).
  ServedFigures since(const ServedFigures& base) const;
};

// The 99th percentile of the durations, in ns, interpolated inside its bucket (as Prometheus'
// histogram_quantile); `bounds_ns` are the buckets' upper bounds, the last bucket is open (its
// lower bound is taken). 0 without requests.
std::uint64_t p99_ns(const ServedFigures& f, std::span<const std::uint64_t> bounds_ns);

// The rule for a window's figures. Fewer than kMinRequests requests in either generation is too
// few to judge: the window is extended, at most kExtraWindows times; then the errors decide alone
// (a p99 of a handful of requests says nothing).
inline constexpr std::uint64_t kMinRequests = 50;
inline constexpr unsigned kExtraWindows = 3;
// A p99 under this much above the old one's never undoes: a hello handler's p99 moves by more
// than a factor of 2 within the first buckets on a loaded machine.
inline constexpr std::uint64_t kLatencyFloorNs = 2'000'000;

struct Verdict {
  enum class Kind { Wait, Promote, Undo };
  Kind kind = Kind::Wait;
  // The figures, for the decision's line: "5xx 33.1% against 0.0% over 214 requests".
  std::string figures;
};

// The window's judgement of the canary against the old generation. `last_chance`: the window
// cannot be extended any more.
Verdict judge(const ServedFigures& canary, const ServedFigures& old, const RolloutSettings& rule,
              std::span<const std::uint64_t> bounds_ns, bool last_chance);

// The figures of one window: each worker's figures are counted from the window's start (its
// baseline then; 0 for one spawned later), and a worker that exits during it leaves its part in
// its generation's tally.
class RolloutWindow {
public:
  void start() {
    baseline_.clear();
    gone_ = {};
  }
  // A worker alive at the window's start, with its figures then.
  void set_baseline(pid_t pid, const ServedFigures& now) { baseline_[pid] = now; }
  // A worker's figures since the window's start.
  ServedFigures since_start(pid_t pid, const ServedFigures& now) const;
  // A worker exits with `last` figures: its part stays with its side (canary or old).
  void on_exit(pid_t pid, bool canary, const ServedFigures& last);
  const ServedFigures& gone(bool canary) const { return gone_[canary ? 1 : 0]; }

private:
  std::map<pid_t, ServedFigures> baseline_;
  std::array<ServedFigures, 2> gone_{};
};

// Where a canary rollout is; published in the pool's counters (the status page, /metrics) as
// its number.
enum class RolloutPhase : std::uint32_t {
  None = 0,  // no canary rollout yet
  Starting,  // the canary workers boot
  Watching,  // both generations serve; the window runs
  Promoting, // the old workers are replaced, a step at a time
  Promoted,  // the last rollout's generation serves every worker
  Undone,    // the last rollout was undone: the old generation serves every worker
};

const char* to_string(RolloutPhase p);

// The workers a rollout of a pool of `workers` puts on the canary (at least 1, and at least one
// old worker left beside it: 0 when the pool is too small for a canary) and replaces per step.
int canary_count(const RolloutSettings& rule, int workers);
int step_count(const RolloutSettings& rule, int workers);

} // namespace process_manager
