// --rollout canary (rollout.hpp decides): the reload's new generation starts on a few workers
// beside the old one, both are watched over a window, then the new one replaces the old workers a
// step at a time, or is undone. The reload stays in State::Reloading throughout: a HUP waits for
// its end, a stop drains both generations.
#include "process_manager/master_impl.hpp"

#include "process_manager/clock.hpp"
#include "process_manager/count_text.hpp"
#include "process_manager/log.hpp"

#include <algorithm>

namespace process_manager {

namespace {
// The status page and /metrics see the window's figures this often while it runs.
constexpr std::uint64_t kPublishEveryNs = 250'000'000;

std::string generation_text(std::uint32_t g) {
  return "rollout of generation " + std::to_string(g);
}
} // namespace

// Called as the reload begins (the new generation is current, sized as configured): with
// --rollout canary, only its canary workers start.
void Master::Impl::begin_rollout() {
  PoolSettings& p = current().pool;
  rollout = Rollout{};
  rollout.phase = RolloutPhase::Starting;
  rollout.generation = current_gen();
  publish_rollout(true);
  if (p.rollout.mode != RolloutMode::Canary) return;
  const int old_workers = static_cast<int>(table.count_active_except(current_gen()));
  const int canary = canary_count(p.rollout, std::min(p.workers, old_workers));
  if (p.mode == PoolMode::OnDemand || canary == 0) {
    PM_LOG(LogLevel::Notice, generation_text(current_gen()) +
                                 ": all at once (a canary needs a static or dynamic pool of 2 "
                                 "workers or more)");
    return;
  }
  rollout.canary = true;
  rollout.full = p.workers;
  rollout.canary_workers = canary;
  rollout.step = step_count(p.rollout, p.workers);
  p.workers = canary;
  PM_LOG(LogLevel::Notice,
         generation_text(current_gen()) + ": " +
             count_text(static_cast<unsigned long>(canary), "canary worker", "canary workers") +
             " beside generation " + std::to_string(gens.previous_number()) + ", watched for " +
             seconds_text(ns(p.rollout.window)));
}

void Master::Impl::advance_rollout() {
  switch (rollout.phase) {
  case RolloutPhase::Starting:
    if (generation_ready(current().pool.workers, members())) start_rollout_window();
    return;
  case RolloutPhase::Watching:
    publish_rollout(false);
    if (monotonic_ns() >= rollout.window_end_ns) judge_rollout();
    return;
  case RolloutPhase::Promoting:
    return promote_rollout_step();
  default:
    return;
  }
}

// The canary is ready: it takes the place of as many old workers (the pool serves with its
// size), and the window starts from every worker's figures now.
void Master::Impl::start_rollout_window() {
  int to_retire = rollout.canary_workers;
  for (Child& w : table.all())
    if (to_retire > 0 && w.generation != current_gen() && !w.stopping()) {
      stop(w, StopReason::Retire);
      --to_retire;
    }
  rollout.window.start();
  if (options.served_figures)
    for (const Child& w : table.all()) // the retiring too: their last requests count
      rollout.window.set_baseline(w.pid, options.served_figures(scoreboard, w.slot));
  rollout.window_end_ns = monotonic_ns() + ns(current().pool.rollout.window);
  rollout.phase = RolloutPhase::Watching;
  publish_rollout(true);
  PM_LOG(LogLevel::Info, generation_text(rollout.generation) + ": canary ready, watching");
}

void Master::Impl::judge_rollout() {
  const RolloutSettings& rule = current().pool.rollout;
  const bool last_chance = rollout.extra_windows >= kExtraWindows;
  publish_rollout(true); // the figures the decision is made on
  Verdict v = judge(rollout_figures(true), rollout_figures(false), rule, options.latency_bounds_ns,
                    last_chance);
  const std::string what = generation_text(rollout.generation);
  if (v.kind == Verdict::Kind::Wait) {
    ++rollout.extra_windows;
    rollout.window_end_ns += ns(rule.window);
    PM_LOG(LogLevel::Notice,
           what + ": " + v.figures + "; watching for another " + seconds_text(ns(rule.window)));
    return;
  }
  if (v.kind == Verdict::Kind::Undo) return undo_rollout(what + " undone: " + v.figures);
  PM_LOG(LogLevel::Notice, what + " promoted: " + v.figures + "; replacing the old workers " +
                               std::to_string(rollout.step) + " at a time");
  rollout.phase = RolloutPhase::Promoting;
  promote_rollout_step();
}

// One step: the old workers retire as their replacements are ready, never leaving fewer serving
// than the pool's size; the next step starts once this one's workers are ready.
void Master::Impl::promote_rollout_step() {
  const std::vector<PoolMember> m = members();
  const int ready_new = static_cast<int>(
      std::count_if(m.begin(), m.end(), [](const PoolMember& p) { return is_ready(p.state); }));
  std::vector<Child*> old;
  for (Child& w : table.all())
    if (w.generation != current_gen() && !w.stopping()) old.push_back(&w);
  const int excess = std::max(0, static_cast<int>(old.size()) + ready_new - rollout.full);
  for (int i = 0; i < excess && i < static_cast<int>(old.size()); ++i)
    stop(*old[static_cast<std::size_t>(i)], StopReason::Retire);
  const int old_left =
      static_cast<int>(old.size()) - std::min(excess, static_cast<int>(old.size()));
  const int started = static_cast<int>(m.size());
  if (ready_new == started && started < rollout.full)
    current().pool.workers = std::min(rollout.full, started + rollout.step);
  if (ready_new < rollout.full || old_left > 0) return;
  PM_LOG(LogLevel::Notice, "generation " + std::to_string(current_gen()) + " serves all " +
                               std::to_string(rollout.full) + " worker(s); rollout complete");
  gens.complete(monotonic_ns()); // with --reload-grace, the previous configuration is kept
  end_rollout(RolloutPhase::Promoted);
  end_reload();
}

// The canary workers stop (finishing what they hold) and the old generation, current again,
// refills the pool; the undone generation's configuration (its plugin copy) goes with it.
void Master::Impl::undo_rollout(const std::string& why) {
  PM_LOG(LogLevel::Error, why + "; generation " + std::to_string(gens.previous_number()) +
                              " serves every worker again");
  end_rollout(RolloutPhase::Undone);
  drop_current_generation();
}

void Master::Impl::end_rollout(RolloutPhase outcome) {
  rollout.phase = outcome;
  publish_rollout(true);
}

// The window's figures of one side: the workers alive, counted from their baseline, and what
// those that exited left.
ServedFigures Master::Impl::rollout_figures(bool canary) const {
  ServedFigures sum = rollout.window.gone(canary);
  if (!options.served_figures) return sum;
  for (const Child& w : table.all())
    if ((w.generation == rollout.generation) == canary)
      sum += rollout.window.since_start(w.pid, options.served_figures(scoreboard, w.slot));
  return sum;
}

// Before its slot is emptied: an exiting worker's requests of the window stay counted.
void Master::Impl::note_rollout_exit(const Child& w) {
  if (rollout.phase != RolloutPhase::Watching || !options.served_figures) return;
  rollout.window.on_exit(w.pid, w.generation == rollout.generation,
                         options.served_figures(scoreboard, w.slot));
}

// The canary's count is the current generation's size while it runs: a TTIN, TTOU or scale
// then would change the canary, not the pool. Refused, with a line.
bool Master::Impl::rollout_holds_size(const char* what) {
  if (!rollout.active()) return false;
  PM_LOG(LogLevel::Warn, std::string(what) + " ignored: the rollout of generation " +
                             std::to_string(rollout.generation) +
                             " holds the pool's size until it ends");
  return true;
}

void Master::Impl::publish_rollout(bool now) {
  const std::uint64_t t = monotonic_ns();
  if (!now && t - rollout.published_ns < kPublishEveryNs) return;
  rollout.published_ns = t;
  PoolCounters& p = scoreboard.pool();
  p.rollout_phase.store(static_cast<std::uint32_t>(rollout.phase), std::memory_order_relaxed);
  p.rollout_generation.store(rollout.generation, std::memory_order_relaxed);
  if (rollout.phase != RolloutPhase::Watching) return; // the decision's figures stay
  auto side = [&](PoolCounters::RolloutSide& s, const ServedFigures& f) {
    s.requests.store(f.requests, std::memory_order_relaxed);
    s.errors.store(f.errors, std::memory_order_relaxed);
    s.p99_ns.store(p99_ns(f, options.latency_bounds_ns), std::memory_order_relaxed);
  };
  side(p.rollout_canary, rollout_figures(true));
  side(p.rollout_old, rollout_figures(false));
}

} // namespace process_manager
