#include "process_manager/master_impl.hpp"

#include "process_manager/clock.hpp"
#include "process_manager/log.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace process_manager {

// TTIN: one worker more in the current generation (dynamic, ondemand: one more at most).
void Master::Impl::on_ttin() {
  if (rollout_holds_size("TTIN")) return;
  int n = grow_by_one(current().pool);
  PM_LOG(LogLevel::Notice, "TTIN: " + std::to_string(n) + " worker(s)" +
                               (sized_by_maximum(current().pool) ? " at most" : ""));
}

int Master::Impl::resize(int target) {
  if (rollout_holds_size("resize")) return rollout.full;
  int n = resize_to(current().pool, target);
  PM_LOG(LogLevel::Notice, "resize: " + std::to_string(n) + " worker(s)" +
                               (sized_by_maximum(current().pool) ? " at most" : ""));
  return n;
}

// TTOU: one worker less in the current generation, never below one.
void Master::Impl::on_ttou() {
  if (rollout_holds_size("TTOU")) return;
  int n = shrink_by_one(current().pool);
  PM_LOG(LogLevel::Notice, "TTOU: " + std::to_string(n) + " worker(s)" +
                               (sized_by_maximum(current().pool) ? " at most" : "") +
                               (n == 1 ? ", the minimum" : ""));
}

void Master::Impl::maintain_pool() {
  mark_booted_by_time();
  check_mold_boots(); // a booting mold past its time, or ready: its workers are spawned below
  if (state == State::Reloading) advance_reload();
  if (!can_spawn(state)) {
    release_held_slots();
    retire_molds();
    return;
  }
  scale();
  fit_pool();
  retire_molds();
  keep_mold(); // a mold that died comes back once its backoff has passed
}

// Spawn or retire to the target (pool_sizing.hpp), unless the breaker or a failed spawn pauses
// spawning; then, once every worker is ready, say so.
void Master::Impl::fit_pool() {
  FitDecision fit = fit_to_target(current().pool.workers, held.size(), members());
  for (std::size_t i = 0; i < fit.release_held; ++i) {
    table.release_slot(held.back().slot);
    held.pop_back();
  }
  stop_all(fit.retire, StopReason::Retire);
  if (monotonic_ns() < crashes.pool_respawn_at_ns()) return; // breaker pause, failed spawns
  respawn_held_slots();
  for (std::size_t i = 0; i < fit.spawn; ++i)
    if (!spawn_worker()) break;
  announce_ready();
}

// Dynamic and ondemand pools (php-fpm's semantics), decided from the scoreboard on every turn:
// the target `workers` moves with the idle count. A worker still starting counts as a spare on
// its way, so that one slow boot does not spawn a crowd.
void Master::Impl::scale() {
  PoolSettings& p = current().pool;
  if (p.mode == PoolMode::Static || rollout.active()) return; // a rollout sizes it itself
  std::uint64_t now = monotonic_ns();
  for (Child& w : table.all()) {
    if (w.generation != current_gen() || w.stopping()) continue;
    const WorkerSlot& s = scoreboard.slot(w.slot);
    IdleWatch idle = watch_idle({w.idle_since_ns, w.requests_seen}, s.state, s.requests, now);
    w.idle_since_ns = idle.idle_since_ns;
    w.requests_seen = idle.requests_seen;
  }
  ScaleDecision d = scale_pool(p, members(), std::exchange(connection_queued, false), now);
  stop_all(d.retire, StopReason::Retire);
  p.workers = d.workers;
}

// The current generation's workers that were not asked to stop, their slots read once.
std::vector<PoolMember> Master::Impl::members() const {
  std::vector<PoolMember> m;
  for (const Child& w : table.all())
    if (w.generation == current_gen() && !w.stopping())
      m.push_back(
          PoolMember{w.pid, scoreboard.slot(w.slot).state, w.started_at_ns, w.idle_since_ns});
  return m;
}

// READY=1 (and, after an upgrade, the ready byte to the old master) once the first generation
// has all its workers past Starting.
void Master::Impl::announce_ready() {
  if (announced_ready || state != State::Running) return;
  if (!generation_ready(current().pool.workers, members())) return;
  announced_ready = true;
  gens.mark_current_ready();
  notifier.notify("READY=1");
  write_ready_byte(options.ready_fd);
  PM_LOG(LogLevel::Info, "generation " + std::to_string(current_gen()) + " ready");
}

bool Master::Impl::spawn_worker(std::optional<std::size_t> held_slot) {
  std::optional<std::size_t> slot = held_slot ? held_slot : table.allocate_slot();
  if (!slot) {
    spawn_failed("no free scoreboard slot for a worker (capacity " +
                 std::to_string(scoreboard.capacity()) + ")");
    return false;
  }
  // --mold on: the generation's mold forks it (none yet: it is started, or waits for its
  // backoff, and the worker with it).
  Mold* mold = current().mold ? keep_mold() : nullptr;
  if (current().mold && !mold) {
    table.release_slot(*slot);
    return false;
  }
  // The master's ends of every log channel, this one's too: a worker must not be able to hand
  // files to another worker as if it were the master.
  std::vector<int> master_fds = master_only_fds();
  LogHandover handover;
  if (current().pool.reopen_logs_signal != 0) handover = LogHandover::make();
  if (handover.valid()) master_fds.push_back(handover.master_fd());
  std::string why;
  pid_t pid = mold ? spawner.spawn_from(*mold, *slot, current_gen(), handover.worker_fd(), why)
                   : spawner.spawn(*slot, current_gen(), current().worker_main, master_fds,
                                   handover.worker_fd());
  if (pid == -1 && why.empty()) why = std::string("fork() failed: ") + std::strerror(errno);
  handover.close_worker_end();
  if (pid == -1) {
    table.release_slot(*slot);
    spawn_failed(mold ? "a worker from the mold: " + why : why);
    return false;
  }
  Child w;
  w.pid = pid;
  w.slot = *slot;
  w.generation = current_gen();
  w.started_at_ns = monotonic_ns();
  w.graceful_timeout = current().pool.graceful_timeout;
  w.request_timeout = current().pool.request_timeout;
  w.retire_signal = current().pool.retire_signal;
  w.reopen_logs_signal = current().pool.reopen_logs_signal;
  w.log_handover = std::move(handover);
  w.stack_trace_on_timeout = current().pool.stack_trace_on_timeout;
  w.resend_stop_every = current().pool.resend_stop_every;
  w.nudge_after = current().pool.nudge_after;
  w.boot_window = current().pool.boot_window;
  w.slow_stack_after = current().pool.slow_stack_after;
  table.add(std::move(w));
  PM_LOG(LogLevel::Info, name(w) + " spawned");
  return true;
}

// A worker is ready once it has left Starting (the worker loop sets Idle before its first accept).
bool Master::Impl::ready(const Child& w) const {
  return is_ready(scoreboard.slot(w.slot).state);
}

// A program that cannot report its own state (--exec) is ready once it has lived its pool's
// boot window: the master writes Idle in its slot for it (the process no longer can).
void Master::Impl::mark_booted_by_time() {
  std::uint64_t now = monotonic_ns();
  for (const Child& w : table.all()) {
    WorkerSlot& s = scoreboard.slot(w.slot);
    if (w.boot_window.count() != 0 && s.state == WorkerState::Starting &&
        now - w.started_at_ns >= ns(w.boot_window)) {
      s.ready_ns.store(now, std::memory_order_relaxed);
      s.state = WorkerState::Idle;
    }
  }
}

} // namespace process_manager
