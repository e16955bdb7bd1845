#include "process_manager/master.hpp"

#include "process_manager/backoff.hpp"
#include "process_manager/binary_upgrade.hpp"
#include "process_manager/clock.hpp"
#include "process_manager/crash_report.hpp"
#include "process_manager/exit_codes.hpp"
#include "process_manager/listen_queue.hpp"
#include "process_manager/log.hpp"
#include "process_manager/master_state.hpp"
#include "process_manager/pool_sizing.hpp"
#include "process_manager/reaper.hpp"
#include "process_manager/signal_pipe.hpp"
#include "process_manager/signals.hpp"
#include "process_manager/spawner.hpp"
#include "process_manager/stack_trace.hpp"
#include "process_manager/systemd_notify.hpp"
#include "process_manager/worker_deadlines.hpp"
#include "process_manager/worker_exit.hpp"
#include "process_manager/worker_table.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>

namespace process_manager {

namespace {

// The master's loop waits for the debugger: long enough for eu-stack or gdb, short enough that
// the other workers' timeouts and respawns are late by at most this.
constexpr std::chrono::milliseconds kStackTraceBudget{1000};
// A crashed or slow worker's stack: rarer (rate-limited), and worth more waiting for on a loaded
// machine, where a debugger reading the debug info of a big binary can take a second.
constexpr std::chrono::milliseconds kForensicStackBudget{3000};

std::string name(const Worker& w) {
  return "worker " + std::to_string(w.pid) + " (gen " + std::to_string(w.generation) + ", slot " +
         std::to_string(w.slot) + ")";
}

bool in_request(WorkerState s) {
  return is_busy(s);
}

} // namespace

struct Master::Impl {
  Impl(Generation first, MasterOptions opts)
      : options(std::move(opts)), scoreboard(options.scoreboard_capacity),
        spawner(scoreboard, signals), table(options.scoreboard_capacity), gens(std::move(first)) {}
  ~Impl();

  int run();

  // The steps of the loop.
  void start();
  void dispatch(int sig);
  void reap();
  void take_crash_stacks();
  void note_unreported_crash(Worker& w, const ExitedChild& c, const WorkerSlot& s);
  void enforce_timeouts();
  void nudge_slow_workers();
  void take_slow_request_stacks();
  void sample_pool();
  std::chrono::milliseconds tick() const;
  void maintain_pool();
  std::vector<int> watched_fds() const;
  void on_readable(int fd);

  // One per signal (signals.hpp has the table).
  void on_term();
  void on_int();
  void on_hup();
  void on_usr1();
  void on_usr2();
  void on_ttin();
  int resize(int target);
  void on_ttou();
  void on_chld();

  void begin_stop(State to, StopReason reason);
  void stop(Worker& w, StopReason reason);
  void send(Worker& w, int sig);
  void on_exit(const Worker& w, const ExitedChild& c, std::uint64_t requests,
               const ExitFacts& facts, const std::string& boot_error);
  void on_boot_failure(const Worker& w, const ExitedChild& c, const std::string& line,
                       const std::string& why);
  void log_crash(LogLevel level, const std::string& line, const CrashPolicy::Decision& d,
                 const std::string& block = {});
  void spawn_failed(const std::string& line);
  void hold_for_respawn(const Worker& w, std::uint64_t at_ns);
  void release_held_slots();
  void respawn_held_slots();
  std::chrono::milliseconds wait_time() const;
  bool spawn_worker(std::optional<std::size_t> held_slot = std::nullopt);
  void advance_reload();
  void kill_past_stop_deadline(std::uint64_t now);
  void resend_stop_signals(std::uint64_t now);
  void kill_timed_out_requests(std::uint64_t now);
  void abandon_reload(const std::string& why, const std::string& block = {});
  void begin_reload(Generation next);
  void go_back(const std::string& why);
  void end_reload();
  bool ready(const Worker& w) const;
  void mark_booted_by_time();
  void scale();
  void fit_pool();
  void announce_ready();
  void on_upgrade_pipe();
  std::vector<PoolMember> members() const;
  void stop_all(const std::vector<pid_t>& pids, StopReason reason);
  Generation& current() { return gens.current(); }
  const Generation& current() const { return gens.current(); }
  std::uint32_t current_gen() const { return gens.current_number(); }

  pid_t master_pid = getpid(); // again in start(): a Master may be built before a fork
  MasterOptions options;
  Scoreboard scoreboard;
  SignalPipe signals;
  Spawner spawner;
  Reaper reaper;
  WorkerTable table;
  CrashPolicy crashes;
  // Slots of crashed workers, kept for their replacement until the slot's backoff has passed:
  // each slot backs off on its own (backoff.hpp), and a held slot counts toward the pool.
  struct HeldSlot {
    std::size_t slot;
    std::uint64_t respawn_at_ns;
  };
  std::vector<HeldSlot> held;

  State state = State::Running;
  int exit_code = exit_code::kOk;
  // The generation the pool is kept at, the one still serving during a reload, the one a reload
  // grace may go back to (generations.hpp).
  Generations gens;

  SystemdNotifier notifier;
  bool announced_ready = false;   // READY=1 sent (and the upgrade's ready byte written)
  bool connection_queued = false; // ondemand: the listen socket was readable this turn
  UpgradeChild upgrade;           // USR2: the new master, until it is ready or gone
  bool handed_over = false;       // the new master serves; this one retires
  std::uint64_t last_sample_ns = 0;
  SlowStackBudget slow_stacks; // --slow-request-threshold stacks, at most some a minute
  // A worker could not boot: the one line about it is written; the stop that follows is
  // logged at debug level only.
  bool boot_failed = false;
  LogLevel stop_level() const { return boot_failed ? LogLevel::Debug : LogLevel::Notice; }
};

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

// HUP: reload by generations. The new generation starts; the old one retires once it is ready.
void Master::Impl::on_hup() {
  if (state == State::Reloading) {
    gens.queue_reload();
    PM_LOG(LogLevel::Notice, "HUP: reload to generation " + std::to_string(current_gen()) +
                                 " in progress; next reload queued");
    return;
  }
  if (!can_override(state, State::Reloading)) return;
  notifier.reloading();
  std::optional<Generation> next;
  try {
    if (options.reload) next = options.reload();
  } catch (const std::exception& e) {
    PM_LOG(LogLevel::Error, std::string("reload: ") + e.what());
  }
  if (!next) {
    PM_LOG(LogLevel::Error, "reload failed, keeping generation " + std::to_string(current_gen()));
    notifier.notify("READY=1");
    return;
  }
  begin_reload(std::move(*next));
  PM_LOG(LogLevel::Notice, "HUP: starting generation " + std::to_string(current_gen()) + " (" +
                               std::to_string(current().pool.workers) + " worker(s))");
}

// The new generation starts beside the current one, which serves until it is ready.
void Master::Impl::begin_reload(Generation next) {
  gens.begin(std::move(next), monotonic_ns());
  state = State::Reloading;
}

// --reload-grace: the generation of the last reload keeps crashing; its predecessor's
// configuration comes back as a new generation (a reload of its own, with its own checks).
void Master::Impl::go_back(const std::string& why) {
  Generations::Undo undo = gens.go_back(monotonic_ns());
  state = State::Reloading;
  PM_LOG(LogLevel::Error, why + ": generation " + std::to_string(undo.undone) +
                              " is undone (reload-grace); generation " +
                              std::to_string(current_gen()) + " runs generation " +
                              std::to_string(undo.restored) + "'s configuration again");
}

// USR1: reopen logs, here and in every worker.
void Master::Impl::on_usr1() {
  try {
    if (options.reopen_logs) options.reopen_logs();
  } catch (const std::exception& e) {
    PM_LOG(LogLevel::Error, std::string("reopen logs: ") + e.what());
  }
  // A worker still starting has no USR1 handler yet, and the default action would kill it.
  for (Worker& w : table.all())
    if (!w.stopping() && ready(w) && w.reopen_logs_signal) ::kill(w.pid, w.reopen_logs_signal);
  PM_LOG(LogLevel::Notice, "USR1: logs reopened");
}

// USR2: binary upgrade. A child of this master execs the binary again, keeping the listen
// socket; once its first generation is ready it writes one byte to our pipe (on_upgrade_pipe),
// and this master retires its workers and exits. Until then both serve the one socket.
void Master::Impl::on_usr2() {
  if (std::optional<std::string> why =
          why_not_upgrade(static_cast<bool>(options.upgrade_exec), upgrade.running(), state)) {
    PM_LOG(LogLevel::Warn, *why);
    return;
  }
  upgrade.start(signals, options.upgrade_exec);
}

void Master::Impl::on_upgrade_pipe() {
  std::string pid = std::to_string(upgrade.pid());
  UpgradeOutcome outcome = upgrade.on_readable();
  if (outcome == UpgradeOutcome::Pending) return;
  if (outcome == UpgradeOutcome::Failed) {
    PM_LOG(LogLevel::Error, "binary upgrade failed: new master " + pid +
                                " exited before it was ready; this master keeps serving");
    if (options.on_upgrade) options.on_upgrade(false);
    return;
  }
  PM_LOG(LogLevel::Notice,
         "binary upgrade: new master " + pid + " is ready; retiring this master's workers");
  handed_over = true;
  scoreboard.pool().successor_master.store(true, std::memory_order_release);
  // Still the main pid: systemd accepts the new one from us, and follows it from now on.
  notifier.notify("MAINPID=" + pid + "\nREADY=1");
  if (options.on_upgrade) options.on_upgrade(true);
  begin_stop(State::Stopping, StopReason::Retire);
}

// TTIN: one worker more in the current generation (dynamic, ondemand: one more at most).
void Master::Impl::on_ttin() {
  int n = grow_by_one(current().pool);
  PM_LOG(LogLevel::Notice, "TTIN: " + std::to_string(n) + " worker(s)" +
                               (sized_by_maximum(current().pool) ? " at most" : ""));
}

int Master::Impl::resize(int target) {
  int n = resize_to(current().pool, target);
  PM_LOG(LogLevel::Notice, "resize: " + std::to_string(n) + " worker(s)" +
                               (sized_by_maximum(current().pool) ? " at most" : ""));
  return n;
}

// TTOU: one worker less in the current generation, never below one.
void Master::Impl::on_ttou() {
  int n = shrink_by_one(current().pool);
  PM_LOG(LogLevel::Notice, "TTOU: " + std::to_string(n) + " worker(s)" +
                               (sized_by_maximum(current().pool) ? " at most" : "") +
                               (n == 1 ? ", the minimum" : ""));
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
  if (first_stop && options.on_stop) { // refuse new connections before the workers drain
    options.on_stop();
    options.listen_fd = -1;
  }
  for (Worker& w : table.all())
    stop(w, reason);
}

void Master::Impl::stop(Worker& w, StopReason reason) {
  Escalation e = stop_escalation(w, reason);
  w.stop_reason = reason;
  send(w, e.signal);
  if (e.signal == SIGKILL) return;
  StopFollowUp next =
      stop_follow_up(w, reason, e, SlotSnapshot::of(scoreboard.slot(w.slot)), monotonic_ns());
  if (next.nudge) ::kill(w.pid, signals::nudge_signal());
  if (next.resend_at_ns != 0) {
    w.stop_signal = e.signal;
    w.resend_at_ns = next.resend_at_ns;
  }
  w.kill_at_ns = next.kill_at_ns;
}

void Master::Impl::stop_all(const std::vector<pid_t>& pids, StopReason reason) {
  for (pid_t pid : pids)
    if (Worker* w = table.find(pid)) stop(*w, reason);
}

void Master::Impl::send(Worker& w, int sig) {
  if (!w.mark_signalled(sig)) return;
  // ESRCH: it has exited and waits to be reaped.
  if (::kill(w.pid, sig) == -1 && errno != ESRCH)
    PM_LOG(LogLevel::Alert, "kill(" + std::to_string(w.pid) + ", " + std::to_string(sig) +
                                ") failed: " + std::strerror(errno));
}

void Master::Impl::reap() {
  for (const ExitedChild& c : reaper.reap()) {
    std::optional<Worker> w = table.remove(c.pid);
    if (!w) {
      PM_LOG(LogLevel::Debug, "reaped unknown child " + std::to_string(c.pid) + ": " + describe(c));
      continue;
    }
    WorkerSlot& s = scoreboard.slot(w->slot);
    note_unreported_crash(*w, c, s);
    std::uint64_t requests = s.requests;
    Scoreboard::RequestInfo last = Scoreboard::read_request(s);
    std::string boot_error = std::strcmp(last.method, kBootFailureMethod) == 0 ? last.uri : "";
    ExitFacts facts;
    facts.ready = s.state != WorkerState::Starting;
    facts.boot_error = !boot_error.empty();
    facts.ready_by_time = w->boot_window.count() != 0;
    facts.generation_ready = w->generation <= gens.ready_number();
    s.request_start_ns = 0;
    s.pid = 0;
    s.state = WorkerState::Free;
    scoreboard.retire(w->slot); // its counters move to the pool's totals: nothing is lost
    if (!w->stopping()) {       // a restart the master did not ask for, by reason
      PoolCounters& p = scoreboard.pool();
      if (c.kind == ExitedChild::Kind::Signaled && c.signal > 0 && c.signal < 65)
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

void Master::Impl::on_exit(const Worker& w, const ExitedChild& c, std::uint64_t requests,
                           const ExitFacts& facts, const std::string& boot_error) {
  std::string line = name(w) + " " + describe(c) + " after " +
                     seconds_text(monotonic_ns() - w.started_at_ns) + ", " +
                     std::to_string(requests) + " requests";
  // The crash block goes with the exit line, whatever is decided about the worker's slot: the
  // crash lines' rate limit (CrashPolicy) is the block's.
  std::string block = w.crash_block.empty() ? "" : ":\n" + w.crash_block;
  bool clean = c.kind == ExitedChild::Kind::Exited && c.code == exit_code::kWorkerDone;
  WorkerExit kind = classify_exit(c, facts); // worker_exit.hpp: what "ready" means
  if (w.stopping()) { // we asked for it: a request-timeout kill is respawned at once, no backoff
    PM_LOG(clean || w.stop_reason != StopReason::Timeout ? stop_level() : LogLevel::Warn,
           line + " (" + to_string(*w.stop_reason) + ")" + block);
  } else if (kind == WorkerExit::Done) { // recycled: maintain_pool() respawns at once
    PM_LOG(LogLevel::Notice, line);
  } else if (kind == WorkerExit::BootFailure) {
    on_boot_failure(w, c, line, boot_error);
  } else {
    std::uint64_t now = monotonic_ns();
    CrashPolicy::Decision d = crashes.on_crash(w.slot, now - w.started_at_ns, now);
    hold_for_respawn(w, d.respawn_at_ns);
    log_crash(c.kind == ExitedChild::Kind::Signaled ? LogLevel::Error : LogLevel::Warn, line, d,
              block);
    if (state == State::Running && gens.crash_undoes_reload(w.generation, now))
      go_back(std::to_string(ReloadGrace::kCrashes) + " crashes since the reload");
  }
}

// A worker that caught a fatal signal waits in its handler (crash_report.hpp): its stack is
// taken now, if its block will be written (the crash lines' rate limit), and it is let go.
void Master::Impl::take_crash_stacks() {
  bool taken = false; // one a turn: the crash line that is due is the first one's
  for (Worker& w : table.all()) {
    WorkerSlot& s = scoreboard.slot(w.slot);
    if (!crash_waiting(s)) continue;
    std::string stack;
    // A crash while booting is a boot failure: the master (or the reload) stops with its one
    // line, so each booting worker gets its stack, whichever line is written; crashes in
    // requests get one a turn, and only for a line that will be written.
    const bool booting = s.state == WorkerState::Starting;
    if (booting || (!taken && crashes.log_due(monotonic_ns()))) {
      stack = worker_frames(capture_stack(w.pid, kForensicStackBudget, s.crash_tid.load()));
      taken = taken || !booting;
    } else {
      stack = "no stack trace: crash lines are rate-limited (at most one a second)\n";
    }
    if (!stack.empty() && stack.back() == '\n') stack.pop_back();
    w.crash_block = describe_crash(s, monotonic_ns(), "stack:\n" + stack);
    release_crashed(s);
  }
}

// A worker that died of a signal while its slot shows a request, without its handler's report:
// SIGKILL (the kernel's OOM killer, or another process: the master's own kills are known), or a
// fatal signal its handler did not catch (a handler the application installed instead). The
// request in flight, no stack. (An --exec program's slot never shows a request.)
void Master::Impl::note_unreported_crash(Worker& w, const ExitedChild& c, const WorkerSlot& s) {
  if (!w.crash_block.empty() || c.kind != ExitedChild::Kind::Signaled || !in_request(s.state))
    return;
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
void Master::Impl::hold_for_respawn(const Worker& w, std::uint64_t at_ns) {
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
  return std::chrono::milliseconds(wait / 1'000'000 + (wait % 1'000'000 != 0));
}

// One line, whatever the number of workers: the first failure says what and why; the others
// (the same cause, as a rule) and the stop that follows are at debug level.
void Master::Impl::on_boot_failure(const Worker& w, const ExitedChild& c, const std::string& line,
                                   const std::string& why) {
  std::string what = "worker " + std::to_string(w.pid) +
                     (why.empty() ? " " + describe_death(c) + " before it was ready (boot failure)"
                                  : " failed to boot: " + why + " (exit code " +
                                        std::to_string(exit_code::kWorkerBootFailure) + ")");
  // A crash while booting (in on_worker_start) has its block, as any crash has.
  const std::string block = w.crash_block.empty() ? "" : ":\n" + w.crash_block;
  if (boot_failed) {
    PM_LOG(LogLevel::Debug, what);
  } else if (w.generation != current_gen()) { // abandoned or retired: nothing depends on it
    PM_LOG(LogLevel::Error, line + (why.empty() ? "" : ": " + why) + block);
  } else if (state == State::Reloading && table.count_active_except(current_gen()) > 0) {
    abandon_reload(what, block);
  } else if (state == State::Running && gens.in_grace(w.generation, monotonic_ns())) {
    PM_LOG(LogLevel::Error, what + block);
    go_back("a replacement could not boot");
  } else { // respawning would only fail again, in a loop
    PM_LOG(LogLevel::Error, what + "; stopping, the master exits with code " +
                                std::to_string(exit_code::kFailure) + block);
    boot_failed = true;
    exit_code = exit_code::kFailure;
    begin_stop(State::Stopping, StopReason::Graceful);
  }
}

void Master::Impl::spawn_failed(const std::string& line) {
  log_crash(LogLevel::Error, line, crashes.on_spawn_failure(monotonic_ns()));
}

// Crashes and failed spawns: one breaker line, at most one line per second.
void Master::Impl::log_crash(LogLevel level, const std::string& line,
                             const CrashPolicy::Decision& d, const std::string& block) {
  if (d.log)
    PM_LOG(level,
           line +
               (d.suppressed ? "; " + std::to_string(d.suppressed) + " more crashes suppressed"
                             : std::string()) +
               block);
  if (d.breaker_tripped) {
    const auto& s = crashes.settings();
    PM_LOG(LogLevel::Error, "crash loop: more than " + std::to_string(s.breaker_crashes) +
                                " crashes within " + seconds_text(ns(s.breaker_window)) +
                                "; respawning paused for " + seconds_text(ns(s.breaker_pause)));
  }
}

void Master::Impl::enforce_timeouts() {
  std::uint64_t now = monotonic_ns();
  gens.end_grace_if_over(now); // the reload held: nothing to go back to
  kill_past_stop_deadline(now);
  resend_stop_signals(now);
  kill_timed_out_requests(now);
  if (state == State::Reloading && gens.deadline_passed(now))
    abandon_reload("generation " + std::to_string(current_gen()) + " not ready after " +
                   seconds_text(ns(current().pool.graceful_timeout)));
}

void Master::Impl::kill_past_stop_deadline(std::uint64_t now) {
  std::size_t killed = 0;
  std::string pids;
  for (Worker& w : table.all()) {
    if (!kill_due(w, now)) continue;
    send(w, SIGKILL);
    ++killed;
    pids += ' ';
    pids += std::to_string(w.pid);
  }
  if (killed > 0)
    PM_LOG(LogLevel::Warn, "SIGKILL to " + std::to_string(killed) +
                               " worker(s) still running after their stop timeout:" + pids);
}

void Master::Impl::resend_stop_signals(std::uint64_t now) {
  for (Worker& w : table.all())
    if (resend_due(w, now)) {
      ::kill(w.pid, w.stop_signal); // not send(): that one sends each signal once
      w.resend_at_ns = now + ns(w.resend_stop_every);
    }
}

void Master::Impl::kill_timed_out_requests(std::uint64_t now) {
  for (Worker& w : table.all()) {
    const WorkerSlot& slot = scoreboard.slot(w.slot);
    SlotSnapshot s = SlotSnapshot::of(slot);
    if (!request_timed_out(w, s, now)) continue;
    Scoreboard::RequestInfo r = Scoreboard::read_request(slot);
    // Taken before the kill: where it hangs is what the person reading this line needs.
    std::string stack = w.stack_trace_on_timeout
                            ? worker_frames(capture_stack(w.pid, kStackTraceBudget, w.pid))
                            : ""; // the handler runs on the main thread, whose id is the pid
    if (!stack.empty() && stack.back() == '\n') stack.pop_back();
    PM_LOG(LogLevel::Error, name(w) + " killed: request \"" + r.method + " " + r.uri +
                                "\" ran for " + seconds_text(running_ns(s, now)) +
                                " (request_timeout " + seconds_text(ns(w.request_timeout)) + ")" +
                                (stack.empty() ? "" : "; stack:\n" + stack));
    ++scoreboard.pool().kills_by_timeout;
    stop(w, StopReason::Timeout);
  }
}

// Workers that run a request longer than nudge_after while holding other connections (kept
// connections, on which the web server may send a request that would wait for this one) are
// nudged once per request; the worker decides whether another worker is free to take them.
void Master::Impl::nudge_slow_workers() {
  if (table.all().size() < 2) return;
  std::uint64_t now = monotonic_ns();
  for (Worker& w : table.all()) {
    SlotSnapshot s = SlotSnapshot::of(scoreboard.slot(w.slot));
    if (!nudge_due(w, s, now)) continue;
    w.nudged_request_ns = s.request_start_ns;
    ::kill(w.pid, signals::nudge_signal());
  }
}

// --slow-request-threshold: the worker's stack while its request is still running, once per
// request (the worker logs the request again when it ends, with its duration and status).
void Master::Impl::take_slow_request_stacks() {
  std::uint64_t now = monotonic_ns();
  for (Worker& w : table.all()) {
    const WorkerSlot& slot = scoreboard.slot(w.slot);
    SlotSnapshot s = SlotSnapshot::of(slot);
    if (!slow_stack_due(w, s, now)) continue;
    w.slow_stack_request_ns = s.request_start_ns;
    if (!slow_stacks.take(now)) continue;
    Scoreboard::RequestInfo r = Scoreboard::read_request(slot);
    // The handler runs on the worker's main thread, whose id is the pid.
    std::string stack = worker_frames(capture_stack(w.pid, kForensicStackBudget, w.pid));
    if (!stack.empty() && stack.back() == '\n') stack.pop_back();
    unsigned not_taken = slow_stacks.take_refused();
    std::string skipped =
        not_taken == 0 ? "" : " (" + std::to_string(not_taken) + " more not taken this minute)";
    PM_LOG(LogLevel::Warn, "slow request in flight: " + name(w) + ", \"" + r.method + " " + r.uri +
                               "\", request id " + r.request_id + ", running for " +
                               seconds_text(running_ns(s, now)) + " (slow-request-threshold " +
                               seconds_text(ns(w.slow_stack_after)) + ")" + skipped + "; stack:\n" +
                               stack);
    return; // one a turn: a crash report does not wait for several debuggers
  }
}

// The listen queue costs a netlink round trip on a Unix socket: not on every 1 ms tick.
void Master::Impl::sample_pool() {
  std::uint64_t now = monotonic_ns();
  if (now - last_sample_ns < 10'000'000) return;
  last_sample_ns = now;
  scoreboard.sample(query_listen_queue(options.listen_fd).depth);
}

// The loop's tick: 1 ms while a nudge may be due (some worker holds several connections),
// kTick otherwise, so that an idle host stays idle.
std::chrono::milliseconds Master::Impl::tick() const {
  if (table.all().size() < 2) return kTick;
  for (const Worker& w : table.all())
    if (std::optional<std::chrono::milliseconds> t =
            nudge_tick(w, scoreboard.slot(w.slot).connections.load(std::memory_order_relaxed)))
      return *t;
  return kTick;
}

void Master::Impl::maintain_pool() {
  mark_booted_by_time();
  if (state == State::Reloading) advance_reload();
  if (!can_spawn(state)) {
    release_held_slots();
    return;
  }
  scale();
  fit_pool();
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
  if (p.mode == PoolMode::Static) return;
  std::uint64_t now = monotonic_ns();
  for (Worker& w : table.all()) {
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
  for (const Worker& w : table.all())
    if (w.generation == current_gen() && !w.stopping())
      m.push_back(
          PoolMember{w.pid, scoreboard.slot(w.slot).state, w.started_at_ns, w.idle_since_ns});
  return m;
}

// The listen socket stays readable while a connection waits: watched only when a connection
// waiting means "spawn one" (ondemand, no worker idle or starting), or the loop would spin.
std::vector<int> Master::Impl::watched_fds() const {
  std::vector<int> fds = options.watch_fds;
  if (upgrade.ready_fd() >= 0) fds.push_back(upgrade.ready_fd());
  if (options.listen_fd >= 0 && can_spawn(state) &&
      wants_queued_connections(current().pool, members()))
    fds.push_back(options.listen_fd);
  return fds;
}

void Master::Impl::on_readable(int fd) {
  if (fd == upgrade.ready_fd())
    on_upgrade_pipe();
  else if (fd == options.listen_fd)
    connection_queued = true;
  else if (options.on_readable)
    options.on_readable(fd);
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
  std::vector<int> master_fds = options.watch_fds;
  master_fds.insert(master_fds.end(), options.private_fds.begin(), options.private_fds.end());
  if (upgrade.ready_fd() >= 0) master_fds.push_back(upgrade.ready_fd());
  pid_t pid = spawner.spawn(*slot, current_gen(), current().worker_main, master_fds);
  if (pid == -1) {
    table.release_slot(*slot);
    spawn_failed(std::string("fork() failed: ") + std::strerror(errno));
    return false;
  }
  Worker w;
  w.pid = pid;
  w.slot = *slot;
  w.generation = current_gen();
  w.started_at_ns = monotonic_ns();
  w.graceful_timeout = current().pool.graceful_timeout;
  w.request_timeout = current().pool.request_timeout;
  w.retire_signal = current().pool.retire_signal;
  w.reopen_logs_signal = current().pool.reopen_logs_signal;
  w.stack_trace_on_timeout = current().pool.stack_trace_on_timeout;
  w.resend_stop_every = current().pool.resend_stop_every;
  w.nudge_after = current().pool.nudge_after;
  w.boot_window = current().pool.boot_window;
  w.slow_stack_after = current().pool.slow_stack_after;
  table.add(w);
  PM_LOG(LogLevel::Info, name(w) + " spawned");
  return true;
}

// A worker is ready once it has left Starting (the worker loop sets Idle before its first accept).
bool Master::Impl::ready(const Worker& w) const {
  return is_ready(scoreboard.slot(w.slot).state);
}

// A program that cannot report its own state (--exec) is ready once it has lived its pool's
// boot window: the master writes Idle in its slot for it (the process no longer can).
void Master::Impl::mark_booted_by_time() {
  std::uint64_t now = monotonic_ns();
  for (const Worker& w : table.all()) {
    WorkerSlot& s = scoreboard.slot(w.slot);
    if (w.boot_window.count() != 0 && s.state == WorkerState::Starting &&
        now - w.started_at_ns >= ns(w.boot_window))
      s.state = WorkerState::Idle;
  }
}

void Master::Impl::advance_reload() {
  if (!generation_ready(current().pool.workers, members())) return;
  std::size_t retired = 0;
  for (Worker& w : table.all())
    if (w.generation != current_gen() && !w.stopping()) {
      stop(w, StopReason::Retire);
      ++retired;
    }
  PM_LOG(LogLevel::Notice, "generation " + std::to_string(current_gen()) + " ready; retiring " +
                               std::to_string(retired) + " worker(s) of older generations");
  gens.complete(monotonic_ns()); // with --reload-grace, the previous configuration is kept
  end_reload();
}

void Master::Impl::abandon_reload(const std::string& why, const std::string& block) {
  PM_LOG(LogLevel::Error, why + "; abandoning generation " + std::to_string(current_gen()) +
                              ", keeping generation " + std::to_string(gens.previous_number()) +
                              block);
  for (Worker& w : table.all())
    if (w.generation == current_gen()) // those already serving finish their requests
      stop(w, ready(w) ? StopReason::Retire : StopReason::Abandon);
  gens.abandon();
  end_reload();
}

void Master::Impl::end_reload() {
  state = State::Running;
  if (announced_ready) notifier.notify("READY=1");
  if (gens.take_queued_reload()) on_hup();
}

// The workers are children of this object: none outlives it (run() normally returns with none).
Master::Impl::~Impl() {
  if (getpid() != master_pid) return;
  for (Worker& w : table.all()) {
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
