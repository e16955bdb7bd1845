// The master's loop and its wiring: the dispatch of signals, stops, and what each exit means
// (respawn holds, boot failures, crash lines). Its policies decide in files of their own and are
// applied by master_pool.cpp, master_reload.cpp, master_timeouts.cpp, master_upgrade.cpp
// (master_impl.hpp).
#include "process_manager/master_impl.hpp"

#include "process_manager/clock.hpp"
#include "process_manager/count_text.hpp"
#include "process_manager/crash_report.hpp"
#include "process_manager/fork_clean.hpp"
#include "process_manager/listen_queue.hpp"
#include "process_manager/log.hpp"
#include "process_manager/signals.hpp"
#include "process_manager/stack_trace.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace process_manager {

int Master::Impl::run() {
  start();
  std::vector<int> ready;
  for (;;) {
    for (int sig : signals.wait(wait_time(), watched_fds(), &ready)) // a signal, a tick, or
      dispatch(sig);                                                 // -> on_term(), on_hup(), ...
    for (int fd : ready) // status socket, upgrade pipe, listen socket (ondemand)
      on_readable(fd);
    take_crash_stacks();         // a worker waits in its crash handler: its stack, then it dies
    reap();                      // collect exits, then account for them
    log_held_crash_count();      // the crash lines a burst held back, once it is over
    enforce_timeouts();          // stop deadlines, request_timeout, reload deadline
    nudge_slow_workers();        // a long request beside kept connections: pass them on
    take_slow_request_stacks();  // a request past --slow-request-threshold: one stack, it goes on
    if (state == State::Stopped) // every worker is gone
      return exit_code;          // kOk, or kFailure after a boot failure
    maintain_pool();             // finish a reload; scale; spawn or retire to the target
    sample_pool();               // max active, max listen queue (every 10 ms at the most)
    notifier.watchdog(monotonic_ns());
  }
}

void Master::Impl::start() {
  master_pid = getpid();
  // A log on a closed pipe must not kill the master; workers get SIG_DFL back at fork.
  ::signal(SIGPIPE, SIG_IGN);
  // Orphans of the workers' children (an --exec program that forks and leaves) come to the
  // master, which reaps every child (reap()), rather than to an init that may not: as PID 1 of a
  // container the kernel sends them here anyway, and the master does the same elsewhere.
  if (::prctl(PR_SET_CHILD_SUBREAPER, 1) != 0)
    PM_LOG(LogLevel::Warn, std::string("prctl(PR_SET_CHILD_SUBREAPER) failed: ") +
                               std::strerror(errno) + "; orphans of workers go to init");
  // Not root: its workers share its user; they may not read its memory or its environment.
  hide_from_own_user();
  signals.install(signals::kMasterSignals);
  PM_LOG(LogLevel::Notice, "master " + std::to_string(master_pid) + " started: generation 1, " +
                               std::to_string(current().pool.workers) + " worker(s)");
  maintain_pool();
}

void Master::Impl::dispatch(int sig) {
  switch (sig) {
  case SIGTERM:
  case SIGQUIT:
    return on_term();
  case SIGINT:
    return on_int();
  case SIGHUP:
    return on_hup();
  case SIGUSR1:
    return on_usr1();
  case SIGUSR2:
    return on_usr2();
  case SIGTTIN:
    return on_ttin();
  case SIGTTOU:
    return on_ttou();
  case SIGCHLD:
    return on_chld();
  }
  PM_LOG(LogLevel::Debug, "ignoring signal " + std::to_string(sig));
}

// TERM, QUIT: graceful stop. Workers finish what they hold; SIGKILL after graceful_timeout.
void Master::Impl::on_term() {
  begin_stop(State::Stopping, StopReason::Graceful);
}

// INT: fast stop. Workers exit now; SIGKILL after 1 s. Also escalates a graceful stop.
void Master::Impl::on_int() {
  begin_stop(State::FastStopping, StopReason::Fast);
}

// USR1: reopen logs, here and in every worker.
void Master::Impl::on_usr1() {
  try {
    if (options.reopen_logs) options.reopen_logs();
  } catch (const std::exception& e) {
    PM_LOG(LogLevel::Error, std::string("reopen logs: ") + e.what());
  }
  // The files just opened go to every worker first (a worker still starting takes them when its
  // loop begins), then the signal: a worker still starting has no USR1 handler yet, and the
  // default action would kill it. Sent before the ready check, so that a worker cannot become
  // ready between the two and miss both.
  std::vector<int> fds = options.log_fds ? options.log_fds() : std::vector<int>{};
  std::size_t unsent = 0;
  for (Child& w : table.all()) {
    if (w.stopping() || !w.reopen_logs_signal) continue;
    if (!fds.empty() && w.log_handover.valid() && !w.log_handover.send(fds)) ++unsent;
    if (ready(w)) ::kill(w.pid, w.reopen_logs_signal);
  }
  if (unsent > 0)
    PM_LOG(LogLevel::Error, "USR1: the new log files could not be handed to " +
                                std::to_string(unsent) +
                                " worker(s) (their channel is full: they do not read it); they "
                                "keep writing to the old files");
  PM_LOG(LogLevel::Notice, "USR1: logs reopened");
}

// CHLD: nothing to do here; reap() runs on every turn of the loop, signal or not.
void Master::Impl::on_chld() {}

void Master::Impl::begin_stop(State to, StopReason reason) {
  if (!can_override(state, to)) return; // a second TERM adds nothing
  PM_LOG(stop_level(),
         std::string(to_string(reason)) + " of " + std::to_string(table.size()) + " worker(s)");
  if (!handed_over) notifier.notify("STOPPING=1"); // after an upgrade the service goes on
  bool first_stop = state != State::Stopping && state != State::FastStopping;
  state = to;
  gens.forget_queued_reload();
  if (rollout.running()) { // both generations drain
    PM_LOG(LogLevel::Notice, "rollout of generation " + std::to_string(rollout.generation) +
                                 " ends with the stop: both generations drain");
    end_rollout(RolloutPhase::Undone);
  }
  if (first_stop && options.on_stop) { // refuse new connections before the workers drain
    options.on_stop();
    options.listen_fd = -1;
  }
  for (Child& w : table.all())
    stop(w, reason);
}

void Master::Impl::reap() {
  for (const ExitedChild& c : reaper.reap()) {
    if (on_mold_exit(c)) continue; // master_mold.cpp
    std::optional<Child> w = table.remove(c.pid);
    if (!w) {
      // An orphan of a worker's own children (an --exec program's background job), adopted as
      // the master is their subreaper (or PID 1 of a container): reaped, so no zombie stays.
      PM_LOG(LogLevel::Debug, "reaped child " + std::to_string(c.pid) +
                                  ", not a worker (an adopted orphan): " + describe(c));
      continue;
    }
    if (options.on_worker_reaped) options.on_worker_reaped(c.pid);
    WorkerSlot& s = scoreboard.slot(w->slot);
    note_unreported_crash(*w, c, s);
    std::uint64_t requests = s.requests;
    Scoreboard::RequestInfo last = Scoreboard::read_request(s);
    std::string boot_error = std::strcmp(last.method, kBootFailureMethod) == 0 ? last.uri : "";
    // A request its worker died in is one of its route's, as a `crashed` outcome.
    if (!w->stopping() && (is_busy(s.state) || busy_threads(s) > 0) &&
        !(c.kind == ExitedChild::Kind::Exited && c.code == exit_code::kWorkerDone))
      scoreboard.count_crashed_request(w->slot);
    ExitFacts facts;
    facts.ready = s.state != WorkerState::Starting;
    facts.boot_error = !boot_error.empty();
    facts.ready_by_time = w->boot_window.count() != 0;
    facts.generation_ready = w->generation <= gens.ready_number();
    note_rollout_exit(*w); // before its slot is emptied
    s.pid = 0;
    s.state = WorkerState::Free;
    scoreboard.retire(w->slot); // its counters move to the pool's totals: nothing is lost
    if (!w->stopping()) {       // a restart the master did not ask for, by reason
      PoolCounters& p = scoreboard.pool();
      if (c.kind == ExitedChild::Kind::Signaled && c.signal > 0 && c.signal < NSIG)
        ++p.exits_by_signal[c.signal];
      else if (c.kind == ExitedChild::Kind::Exited)
        ++p.exits_by_code[c.code & 255];
    }
    on_exit(*w, c, requests, facts, boot_error);
  }
  if ((state == State::Stopping || state == State::FastStopping) && table.empty()) {
    state = State::Stopped;
    PM_LOG(stop_level(), "all workers gone; master exits with code " + std::to_string(exit_code));
  }
}

void Master::Impl::on_exit(const Child& w, const ExitedChild& c, std::uint64_t requests,
                           const ExitFacts& facts, const std::string& boot_error) {
  std::string line = name(w) + " " + describe(c) + " after " +
                     seconds_text(monotonic_ns() - w.started_at_ns) + ", " +
                     std::to_string(requests) + " requests";
  if (c.kind == ExitedChild::Kind::Signaled && c.signal == SIGKILL && !w.was_signalled(SIGKILL) &&
      options.oom_kill_note)
    if (std::string note = options.oom_kill_note(); !note.empty()) {
      line += "; " + note;
      ++scoreboard.pool().oom_kills;
    }
  // The crash block goes with the exit line, whatever is decided about the worker's slot: the
  // crash lines' rate limit (CrashPolicy) is the block's.
  const std::string& block = w.crash_block;
  const std::string colon = block.empty() ? "" : ":";
  bool clean = c.kind == ExitedChild::Kind::Exited && c.code == exit_code::kWorkerDone;
  WorkerExit kind = classify_exit(c, facts); // worker_exit.hpp: what "ready" means
  if (w.stopping()) { // we asked for it: a request-timeout kill is respawned at once, no backoff
    PM_LOG_BLOCK(clean || w.stop_reason != StopReason::Timeout ? stop_level() : LogLevel::Warn,
                 line + " (" + to_string(*w.stop_reason) + ")" + colon, block);
  } else if (kind == WorkerExit::Done) { // recycled: maintain_pool() respawns at once
    PM_LOG(LogLevel::Notice, line);
  } else if (kind == WorkerExit::BootFailure) {
    on_boot_failure(w, c, line, boot_error);
  } else {
    std::uint64_t now = monotonic_ns();
    const bool captured = scoreboard.slot(w.slot).crash_captured.load(std::memory_order_acquire);
    // Its age counts from ready, not from the fork: a handler that takes seconds to boot (or a
    // loaded machine that boots it slowly) and crashes on its first request is still a crash
    // loop, and must meet the backoff and the breaker.
    const std::uint64_t ready_ns = scoreboard.slot(w.slot).ready_ns.load(std::memory_order_relaxed);
    const std::uint64_t lived_ns = now - (ready_ns != 0 ? ready_ns : w.started_at_ns);
    CrashPolicy::Decision d = crashes.on_crash(w.slot, lived_ns, now, captured);
    hold_for_respawn(w, d.respawn_at_ns);
    log_crash(c.kind == ExitedChild::Kind::Signaled ? LogLevel::Error : LogLevel::Warn, line, d,
              block);
    if (state == State::Reloading && rollout.active() && w.generation == rollout.generation)
      undo_rollout("rollout of generation " + std::to_string(w.generation) + " undone: " + name(w) +
                   " crashed");
    else if (state == State::Running && gens.crash_undoes_reload(w.generation, now))
      go_back(std::to_string(ReloadGrace::kCrashes) + " crashes since the reload");
  }
}

// A worker that caught a fatal signal waits in its handler (crash_report.hpp): its stack is
// taken now, if its block will be written (the crash lines' rate limit), and it is let go.
void Master::Impl::take_crash_stacks() {
  bool taken = false; // one a turn
  for (Child& w : table.all()) {
    WorkerSlot& s = scoreboard.slot(w.slot);
    if (!crash_waiting(s)) continue;
    std::string stack;
    // A crash while booting is a boot failure: the master (or the reload) stops with its one
    // line, so each booting worker gets its stack, whichever line is written; a crash in a
    // request gets one for a line that will be written (a captured one's always is), one a
    // second at the most: the debugger's time must not slow a crash loop down (CrashPolicy).
    const bool booting = s.state == WorkerState::Starting;
    const bool captured = s.crash_captured.load(std::memory_order_acquire);
    const std::uint64_t now = monotonic_ns();
    if (booting ||
        (!taken && (captured || crashes.lines_due(now) > 0) && crashes.take_stack_turn(now))) {
      // The thread is the worker's word (its slot): checked against the pid the master forked.
      const pid_t tid = s.crash_tid.load();
      const bool own_thread = tid == 0 || is_thread_of(w.pid, tid);
      stack = worker_frames(capture_stack(w.pid, kForensicStackBudget, own_thread ? tid : 0));
      if (!own_thread)
        stack += "(the slot named thread " + std::to_string(tid) + ", not one of worker " +
                 std::to_string(w.pid) + "'s: every thread's stack instead)\n";
      taken = taken || !booting;
    } else {
      stack = "no stack trace: the master takes one a second at the most\n";
    }
    if (!stack.empty() && stack.back() == '\n') stack.pop_back();
    w.crash_block = describe_crash(s, monotonic_ns(), "stack:\n" + stack);
    scoreboard.pool().requests_lost_crash += requests_lost_beside(s);
    release_crashed(s);
  }
}

// A worker that died of a signal while its slot shows a request, without its handler's report:
// SIGKILL (the kernel's OOM killer, or another process: the master's own kills are known), or a
// fatal signal its handler did not catch (a handler the application installed instead). The
// request in flight, no stack. (An --exec program's slot never shows a request.)
void Master::Impl::note_unreported_crash(Child& w, const ExitedChild& c, const WorkerSlot& s) {
  if (!w.crash_block.empty() || c.kind != ExitedChild::Kind::Signaled || !is_busy(s.state)) return;
  if (c.signal == SIGKILL && !w.was_signalled(SIGKILL))
    w.crash_block = describe_crash(s, monotonic_ns(),
                                   "no stack trace: SIGKILL, not sent by the master (the kernel's "
                                   "OOM killer sends it: see dmesg)");
  else if (is_fatal_signal(c.signal))
    w.crash_block =
        describe_crash(s, monotonic_ns(), "no stack trace: the crash handler did not run");
}

// The replacement of a crashed worker of the current generation goes in the same slot, so
// that the slot's backoff follows it.
void Master::Impl::hold_for_respawn(const Child& w, std::uint64_t at_ns) {
  if (w.generation != current_gen() || !can_spawn(state) || !table.reserve_slot(w.slot)) return;
  held.push_back(HeldSlot{w.slot, at_ns});
}

void Master::Impl::release_held_slots() {
  for (const HeldSlot& h : held)
    table.release_slot(h.slot);
  held.clear();
}

void Master::Impl::respawn_held_slots() {
  std::uint64_t now = monotonic_ns();
  for (std::size_t i = 0; i < held.size();) {
    if (held[i].respawn_at_ns > now) {
      ++i;
      continue;
    }
    std::size_t slot = held[i].slot;
    held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
    if (!spawn_worker(slot)) return; // spawn_worker released the slot and delays the pool
  }
}

// A tick, or sooner when a held slot's backoff ends: a replacement is not late by a tick.
std::chrono::milliseconds Master::Impl::wait_time() const {
  std::uint64_t now = monotonic_ns();
  std::uint64_t wait = ns(tick());
  for (const HeldSlot& h : held) {
    std::uint64_t at = std::max(h.respawn_at_ns, crashes.pool_respawn_at_ns());
    wait = std::min(wait, at > now ? at - now : 0);
  }
  if (std::uint64_t at = crashes.held_count_due_ns())
    wait = std::min(wait, at > now ? at - now : 0);
  return std::chrono::milliseconds(wait / 1'000'000 + (wait % 1'000'000 != 0));
}

// One line, whatever the number of workers: the first failure says what and why; the others
// (the same cause, as a rule) and the stop that follows are at debug level.
void Master::Impl::on_boot_failure(const Child& w, const ExitedChild& c, const std::string& line,
                                   const std::string& reported) {
  std::string why = reported;
  if (const Generation& g = current();
      !why.empty() && w.generation == current_gen() && g.explain_boot_failure)
    why += g.explain_boot_failure(why);
  std::string what = "worker " + std::to_string(w.pid) +
                     (why.empty() ? " " + describe_death(c) + " before it was ready (boot failure)"
                                  : " failed to boot: " + why + " (exit code " +
                                        std::to_string(exit_code::kWorkerBootFailure) + ")");
  // A crash while booting (in on_worker_start) has its block, as any crash has.
  const std::string& block = w.crash_block;
  const std::string colon = block.empty() ? "" : ":";
  if (boot_failed) {
    PM_LOG(LogLevel::Debug, what);
  } else if (w.generation != current_gen()) { // abandoned or retired: nothing depends on it
    PM_LOG_BLOCK(LogLevel::Error, line + (why.empty() ? "" : ": " + why) + colon, block);
  } else if (state == State::Reloading && table.count_active_except(current_gen()) > 0) {
    abandon_reload(what, block);
  } else if (state == State::Running && gens.in_grace(w.generation, monotonic_ns())) {
    PM_LOG_BLOCK(LogLevel::Error, what + colon, block);
    go_back("a replacement could not boot");
  } else { // respawning would only fail again, in a loop
    PM_LOG_BLOCK(LogLevel::Error,
                 what + "; stopping, the master exits with code " +
                     std::to_string(exit_code::kFailure) + colon,
                 block);
    boot_failed = true;
    exit_code = exit_code::kFailure;
    begin_stop(State::Stopping, StopReason::Graceful);
  }
}

void Master::Impl::spawn_failed(const std::string& line) {
  log_crash(LogLevel::Error, line, crashes.on_spawn_failure(monotonic_ns()));
}

// Crashes and failed spawns: one breaker line; the first few of a burst, then one a second
// (CrashPolicy), and the count of the others when the burst is over (log_held_crash_count).
void Master::Impl::log_crash(LogLevel level, const std::string& line,
                             const CrashPolicy::Decision& d, const std::string& block) {
  if (d.log) PM_LOG_BLOCK(level, line + (block.empty() ? "" : ":"), block);
  if (d.breaker_tripped) {
    const auto& s = crashes.settings();
    PM_LOG(LogLevel::Error, "crash loop: more than " + std::to_string(s.breaker_crashes) +
                                " crashes within " + seconds_text(ns(s.breaker_window)) +
                                "; respawning paused for " + seconds_text(ns(s.breaker_pause)));
  }
}

void Master::Impl::log_held_crash_count() {
  if (!crashes.held_count_due_ns()) return; // nothing held back: one load, every turn
  if (unsigned long n = crashes.take_held_count(monotonic_ns()))
    PM_LOG(LogLevel::Error, count_text(n, "more crash", "more crashes") +
                                " suppressed (crash lines are rate-limited; the first of a "
                                "burst are above)");
}

// The listen queue costs a netlink round trip on a Unix socket: not on every 1 ms tick.
void Master::Impl::sample_pool() {
  std::uint64_t now = monotonic_ns();
  if (now - last_sample_ns < 10'000'000) return;
  last_sample_ns = now;
  scoreboard.sample(query_listen_queue(options.listen_fd).depth);
  const PoolSettings& pool = current().pool;
  const int most = sized_by_maximum(pool) && pool.max_workers > 0 ? pool.max_workers : pool.workers;
  PoolCounters& counters = scoreboard.pool();
  // During a canary rollout the pool keeps its size across both generations.
  const int target = rollout.active() ? rollout.full : pool.workers;
  counters.target_workers.store(static_cast<std::uint32_t>(target), std::memory_order_relaxed);
  counters.max_workers.store(static_cast<std::uint32_t>(std::max(most, pool.workers)),
                             std::memory_order_relaxed);
  counters.ready_generation.store(gens.ready_number(), std::memory_order_relaxed);
}

// The listen socket stays readable while a connection waits: watched only when a connection
// waiting means "spawn one" (ondemand, no worker idle or starting), or the loop would spin.
std::vector<int> Master::Impl::watched_fds() const {
  std::vector<int> fds = options.watch_fds;
  if (upgrade.pipe_fd() >= 0) fds.push_back(upgrade.pipe_fd());
  for (const auto& m : molds) // a booting mold's word (master_mold.cpp)
    if (!m->booted()) fds.push_back(m->channel());
  // The mode first: the members are not gathered on every turn of a pool that never asks.
  // Not while the generation's mold boots (or waits to restart): nothing could be spawned, and the
  // waiting connection would wake the loop at once, again and again.
  if (current().pool.mode == PoolMode::OnDemand && options.listen_fd >= 0 && can_spawn(state) &&
      mold_can_fork() && wants_queued_connections(current().pool, members()))
    fds.push_back(options.listen_fd);
  return fds;
}

void Master::Impl::on_readable(int fd) {
  if (fd == upgrade.pipe_fd())
    on_upgrade_pipe();
  else if (fd == options.listen_fd)
    connection_queued = true;
  else if (is_booting_mold(fd))
    check_mold_boots();
  else if (options.on_readable)
    options.on_readable(fd);
}

// The workers are children of this object: none outlives it (run() normally returns with none).
Master::Impl::~Impl() {
  if (getpid() != master_pid) return;
  for (Child& w : table.all()) {
    ::kill(w.pid, SIGKILL);
    ::waitpid(w.pid, nullptr, 0);
  }
}

Master::Master(Generation first, MasterOptions options)
    : impl_(std::make_unique<Impl>(std::move(first), std::move(options))) {}
Master::~Master() = default;
int Master::run() {
  return impl_->run();
}
Scoreboard& Master::scoreboard() {
  return impl_->scoreboard;
}

int Master::resize(int n) {
  return impl_->resize(n);
}

} // namespace process_manager
