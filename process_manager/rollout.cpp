#include "process_manager/rollout.hpp"

#include <algorithm>
#include <cstdio>

namespace process_manager {

ServedFigures& ServedFigures::operator+=(const ServedFigures& o) {
  requests += o.requests;
  errors += o.errors;
  for (std::size_t i = 0; i < kFigureBuckets; ++i)
    buckets[i] += o.buckets[i];
  return *this;
}

ServedFigures ServedFigures::since(const ServedFigures& base) const {
  auto minus = [](std::uint64_t a, std::uint64_t b) { return a > b ? a - b : 0; };
  ServedFigures d;
  d.requests = minus(requests, base.requests);
  d.errors = minus(errors, base.errors);
  for (std::size_t i = 0; i < kFigureBuckets; ++i)
    d.buckets[i] = minus(buckets[i], base.buckets[i]);
  return d;
}

std::uint64_t p99_ns(const ServedFigures& f, std::span<const std::uint64_t> bounds_ns) {
  std::uint64_t total = 0;
  for (std::uint64_t b : f.buckets)
    total += b;
  if (total == 0) return 0;
  // The rank of the 99th percentile, 1-based: the smallest rank with 99% of requests at or below.
  const double rank = 0.99 * static_cast<double>(total);
  double below = 0;
  for (std::size_t i = 0; i < kFigureBuckets; ++i) {
    const double in = static_cast<double>(f.buckets[i]);
    if (below + in >= rank && in > 0) {
      const double lower = i == 0 ? 0 : static_cast<double>(bounds_ns[i - 1]);
      if (i >= bounds_ns.size()) return static_cast<std::uint64_t>(lower); // the open bucket
      const double upper = static_cast<double>(bounds_ns[i]);
      return static_cast<std::uint64_t>(lower + (upper - lower) * (rank - below) / in);
    }
    below += in;
  }
  return bounds_ns.empty() ? 0 : bounds_ns.back();
}

namespace {

double share(const ServedFigures& f) {
  return f.requests ? static_cast<double>(f.errors) / static_cast<double>(f.requests) : 0;
}

std::string percent(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", v * 100);
  return buf;
}

std::string milliseconds(std::uint64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", static_cast<double>(ns) / 1e6);
  return buf;
}

} // namespace

Verdict judge(const ServedFigures& canary, const ServedFigures& old, const RolloutSettings& rule,
              std::span<const std::uint64_t> bounds_ns, bool last_chance) {
  const bool enough = canary.requests >= kMinRequests && old.requests >= kMinRequests;
  const std::string over = " over " + std::to_string(canary.requests) + " requests (" +
                           std::to_string(old.requests) + " on the old generation)";
  const std::string errors = "5xx " + percent(share(canary)) + " against " + percent(share(old));
  Verdict v;
  if (!enough && !last_chance) {
    v.figures = errors + over + ": too few to judge";
    return v;
  }
  if (share(canary) - share(old) > rule.undo_on_errors) {
    v.kind = Verdict::Kind::Undo;
    v.figures = errors + over;
    return v;
  }
  const std::uint64_t p99_new = p99_ns(canary, bounds_ns);
  const std::uint64_t p99_old = p99_ns(old, bounds_ns);
  const std::string latency = "p99 " + milliseconds(p99_new) + " against " + milliseconds(p99_old);
  if (enough && p99_new > p99_old + kLatencyFloorNs &&
      static_cast<double>(p99_new) > rule.undo_on_latency * static_cast<double>(p99_old)) {
    v.kind = Verdict::Kind::Undo;
    v.figures = latency + over;
    return v;
  }
  v.kind = Verdict::Kind::Promote;
  v.figures = errors + ", " + latency + over + (enough ? "" : ": too few, judged on errors");
  return v;
}

ServedFigures RolloutWindow::since_start(pid_t pid, const ServedFigures& now) const {
  auto it = baseline_.find(pid);
  return it == baseline_.end() ? now : now.since(it->second);
}

void RolloutWindow::on_exit(pid_t pid, bool canary, const ServedFigures& last) {
  gone_[canary ? 1 : 0] += since_start(pid, last);
  baseline_.erase(pid);
}

const char* to_string(RolloutPhase p) {
  switch (p) {
  case RolloutPhase::None:
    return "none";
  case RolloutPhase::Starting:
    return "starting";
  case RolloutPhase::Watching:
    return "watching";
  case RolloutPhase::Promoting:
    return "promoting";
  case RolloutPhase::Promoted:
    return "promoted";
  case RolloutPhase::Undone:
    return "undone";
  }
  return "?";
}

int canary_count(const RolloutSettings& rule, int workers) {
  if (workers < 2) return 0;
  return std::clamp(rule.canary_workers, 1, workers - 1);
}

int step_count(const RolloutSettings& rule, int workers) {
  return rule.step > 0 ? rule.step : std::max(1, workers / 4);
}

} // namespace process_manager
