#include "process_manager/master.hpp"

#include "process_manager/backoff.hpp"
#include "process_manager/clock.hpp"
#include "process_manager/crash_report.hpp"
#include "process_manager/exit_codes.hpp"
#include "process_manager/listen_queue.hpp"
#include "process_manager/log.hpp"
#include "process_manager/master_state.hpp"
#include "process_manager/reaper.hpp"
#include "process_manager/reload_grace.hpp"
#include "process_manager/signal_pipe.hpp"
#include "process_manager/signals.hpp"
#include "process_manager/spawner.hpp"
#include "process_manager/stack_trace.hpp"
#include "process_manager/systemd_notify.hpp"
#include "process_manager/worker_exit.hpp"
#include "process_manager/worker_table.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace process_manager {

namespace {

// Short enough that timeouts fire on time, long enough that an idle master costs nothing.
constexpr std::chrono::milliseconds kTick{100};
// The master's loop waits for the debugger: long enough for eu-stack or gdb, short enough that
// the other workers' timeouts and respawns are late by at most this.
constexpr std::chrono::milliseconds kStackTraceBudget{1000};
// A crashed or slow worker's stack: rarer (rate-limited), and worth more waiting for on a loaded
// machine, where a debugger reading the debug info of a big binary can take a second.
constexpr std::chrono::milliseconds kForensicStackBudget{3000};
// Slow-request stacks stop the master's loop for the debugger's time, and a pool whose every
// request is slow would have one taken for each: a bound.
constexpr unsigned kSlowStacksPerMinute = 10;

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
        spawner(scoreboard, signals), table(options.scoreboard_capacity),
        current(std::move(first)) {
    if (current.pool.mode == PoolMode::OnDemand) current.pool.workers = 0;
  }
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
  void abandon_reload(const std::string& why, const std::string& block = {});
  void begin_reload(Generation next);
  void go_back(const std::string& why);
  void end_reload();
  bool ready(const Worker& w) const;
  void mark_booted_by_time();
  void scale();
  void announce_ready();
  void on_upgrade_pipe();

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
  // The generation the pool is kept at. During a reload, `previous` is the one still serving,
  // kept so that a failed reload can fall back to it.
  Generation current;
  std::uint32_t current_gen = 1;
  std::optional<Generation> previous;
  std::uint32_t previous_gen = 0;
  std::uint32_t last_gen = 1;
  std::uint32_t ready_gen = 0; // the newest generation that was ready (all its workers) once
  std::uint64_t reload_deadline_ns = 0;
  bool reload_queued = false;
  // --reload-grace: the configuration before the last reload, while its grace lasts.
  std::optional<Generation> fallback;
  std::uint32_t fallback_gen = 0;
  ReloadGrace grace;

  SystemdNotifier notifier;
  bool announced_ready = false;   // READY=1 sent (and the upgrade's ready byte written)
  bool connection_queued = false; // ondemand: the listen socket was readable this turn
  pid_t upgrade_pid = -1;         // USR2: the new master, until it is ready or gone
  int upgrade_fd = -1;            // its ready pipe
  bool handed_over = false;       // the new master serves; this one retires
  std::uint64_t last_sample_ns = 0;
  std::uint64_t slow_window_ns = 0; // the minute slow-request stacks are counted in
  unsigned slow_stacks = 0;         // taken in it
  unsigned slow_skipped = 0;        // not taken in it, said in the next one's line
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
                               std::to_string(current.pool.workers) + " worker(s)");
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
    reload_queued = true;
    PM_LOG(LogLevel::Notice, "HUP: reload to generation " + std::to_string(current_gen) +
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
    PM_LOG(LogLevel::Error, "reload failed, keeping generation " + std::to_string(current_gen));
    notifier.notify("READY=1");
    return;
  }
  begin_reload(std::move(*next));
  PM_LOG(LogLevel::Notice, "HUP: starting generation " + std::to_string(current_gen) + " (" +
                               std::to_string(current.pool.workers) + " worker(s))");
}

// The new generation starts beside the current one, which serves until it is ready.
void Master::Impl::begin_reload(Generation next) {
  if (next.pool.mode == PoolMode::OnDemand) next.pool.workers = 0;
  previous = std::move(current);
  previous_gen = current_gen;
  current = std::move(next);
  current_gen = ++last_gen;
  state = State::Reloading;
  reload_deadline_ns = monotonic_ns() + ns(current.pool.graceful_timeout);
}

// --reload-grace: the generation of the last reload keeps crashing; its predecessor's
// configuration comes back as a new generation (a reload of its own, with its own checks).
void Master::Impl::go_back(const std::string& why) {
  std::uint32_t broken = current_gen;
  grace.stop();
  Generation back = std::move(*fallback);
  fallback.reset();
  begin_reload(std::move(back));
  PM_LOG(LogLevel::Error, why + ": generation " + std::to_string(broken) +
                              " is undone (reload-grace); generation " +
                              std::to_string(current_gen) + " runs generation " +
                              std::to_string(fallback_gen) + "'s configuration again");
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
  if (!options.upgrade_exec) {
    PM_LOG(LogLevel::Warn, "USR2: binary upgrade not supported by this program");
    return;
  }
  if (upgrade_pid > 0 || state != State::Running) {
    PM_LOG(LogLevel::Warn, std::string("USR2 ignored: ") +
                               (upgrade_pid > 0 ? "an upgrade is in progress" : to_string(state)));
    return;
  }
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) == -1) {
    PM_LOG(LogLevel::Error, std::string("USR2: pipe2() failed: ") + std::strerror(errno));
    return;
  }
  sigset_t mask = block_all_signals();
  pid_t pid = fork();
  if (pid == 0) { // the new master-to-be: a clean process, then exec
    reset_signal_dispositions();
    signals.close_in_child();
    restore_signal_mask(mask);
    ::close(fds[0]);
    ::fcntl(fds[1], F_SETFD, 0); // the one fd besides the listen socket that crosses exec
    options.upgrade_exec(fds[1]);
    _exit(127);
  }
  int fork_errno = errno;
  restore_signal_mask(mask);
  ::close(fds[1]);
  if (pid == -1) {
    ::close(fds[0]);
    PM_LOG(LogLevel::Error, std::string("USR2: fork() failed: ") + std::strerror(fork_errno));
    return;
  }
  upgrade_pid = pid;
  upgrade_fd = fds[0];
  PM_LOG(LogLevel::Notice, "USR2: binary upgrade: new master " + std::to_string(pid) + " starting");
}

void Master::Impl::on_upgrade_pipe() {
  char byte;
  ssize_t n = ::read(upgrade_fd, &byte, 1);
  if (n < 0 && (errno == EINTR || errno == EAGAIN)) return;
  ::close(std::exchange(upgrade_fd, -1));
  std::string pid = std::to_string(std::exchange(upgrade_pid, -1));
  if (n != 1) {
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
  int& n = current.pool.mode == PoolMode::Static ? current.pool.workers : current.pool.max_workers;
  ++n;
  PM_LOG(LogLevel::Notice, "TTIN: " + std::to_string(n) + " worker(s)" +
                               (current.pool.mode == PoolMode::Static ? "" : " at most"));
}

int Master::Impl::resize(int target) {
  int& n = current.pool.mode == PoolMode::Static ? current.pool.workers : current.pool.max_workers;
  n = std::max(1, target);
  if (current.pool.mode != PoolMode::Static)
    current.pool.workers = std::min(current.pool.workers, n);
  PM_LOG(LogLevel::Notice, "resize: " + std::to_string(n) + " worker(s)" +
                               (current.pool.mode == PoolMode::Static ? "" : " at most"));
  return n;
}

// TTOU: one worker less in the current generation, never below one.
void Master::Impl::on_ttou() {
  int& n = current.pool.mode == PoolMode::Static ? current.pool.workers : current.pool.max_workers;
  if (n > 1) --n;
  if (current.pool.mode != PoolMode::Static)
    current.pool.workers = std::min(current.pool.workers, n);
  PM_LOG(LogLevel::Notice, "TTOU: " + std::to_string(n) + " worker(s)" +
                               (current.pool.mode == PoolMode::Static ? "" : " at most") +
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
  reload_queued = false;
  if (first_stop && options.on_stop) { // refuse new connections before the workers drain
    options.on_stop();
    options.listen_fd = -1;
  }
  for (Worker& w : table.all())
    stop(w, reason);
}

void Master::Impl::stop(Worker& w, StopReason reason) {
  Escalation e = escalation(reason, w.graceful_timeout);
  if (reason == StopReason::Retire) e.signal = w.retire_signal;
  w.stop_reason = reason;
  send(w, e.signal);
  if (e.signal == SIGKILL) return;
  // A retired worker inside a slow request would look at its stop only after the handler: the
  // nudge has it pass its other connections on now, to the workers that go on.
  const WorkerSlot& s = scoreboard.slot(w.slot);
  if (reason == StopReason::Retire && w.nudge_after.count() != 0 &&
      s.request_start_ns.load(std::memory_order_relaxed) != 0 &&
      s.connections.load(std::memory_order_relaxed) >= 2)
    ::kill(w.pid, signals::nudge_signal());
  if (w.resend_stop_every.count() > 0) {
    w.stop_signal = e.signal;
    w.resend_at_ns = monotonic_ns() + ns(w.resend_stop_every);
  }
  std::uint64_t kill_at = monotonic_ns() + ns(e.kill_after);
  if (w.kill_at_ns == 0 || kill_at < w.kill_at_ns) w.kill_at_ns = kill_at;
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
    facts.generation_ready = w->generation <= ready_gen;
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
  if (c.kind == ExitedChild::Kind::Signaled && c.signal == SIGKILL && !w.was_signalled(SIGKILL) &&
      options.oom_kill_note)
    if (std::string note = options.oom_kill_note(); !note.empty()) {
      line += "; " + note;
      ++scoreboard.pool().oom_kills;
    }
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
    if (fallback && state == State::Running && grace.on_crash(w.generation, now))
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
  if (w.generation != current_gen || !can_spawn(state) || !table.reserve_slot(w.slot)) return;
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
  } else if (w.generation != current_gen) { // abandoned or retired: nothing depends on it
    PM_LOG(LogLevel::Error, line + (why.empty() ? "" : ": " + why) + block);
  } else if (state == State::Reloading && table.count_active_except(current_gen) > 0) {
    abandon_reload(what, block);
  } else if (fallback && state == State::Running && grace.watching(w.generation, monotonic_ns())) {
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
  if (fallback && grace.over(now)) fallback.reset(); // the reload held: nothing to go back to
  std::size_t killed = 0;
  std::string pids;
  for (Worker& w : table.all()) {
    if (w.kill_at_ns != 0 && now >= w.kill_at_ns && !w.was_signalled(SIGKILL)) {
      send(w, SIGKILL);
      ++killed;
      pids += ' ';
      pids += std::to_string(w.pid);
    }
  }
  if (killed > 0)
    PM_LOG(LogLevel::Warn, "SIGKILL to " + std::to_string(killed) +
                               " worker(s) still running after their stop timeout:" + pids);
  for (Worker& w : table.all())
    if (w.resend_at_ns != 0 && now >= w.resend_at_ns && !w.was_signalled(SIGKILL)) {
      ::kill(w.pid, w.stop_signal); // not send(): that one sends each signal once
      w.resend_at_ns = now + ns(w.resend_stop_every);
    }

  for (Worker& w : table.all()) {
    const WorkerSlot& s = scoreboard.slot(w.slot);
    std::uint64_t start = s.request_start_ns;
    if (w.request_timeout.count() == 0 || w.was_signalled(SIGKILL) || !in_request(s.state) ||
        start == 0 || now < start || now - start <= ns(w.request_timeout))
      continue;
    Scoreboard::RequestInfo r = Scoreboard::read_request(s);
    // Taken before the kill: where it hangs is what the person reading this line needs.
    std::string stack = w.stack_trace_on_timeout
                            ? worker_frames(capture_stack(w.pid, kStackTraceBudget, w.pid))
                            : ""; // the handler runs on the main thread, whose id is the pid
    if (!stack.empty() && stack.back() == '\n') stack.pop_back();
    PM_LOG(LogLevel::Error, name(w) + " killed: request \"" + r.method + " " + r.uri +
                                "\" ran for " + seconds_text(now - start) + " (request_timeout " +
                                seconds_text(ns(w.request_timeout)) + ")" +
                                (stack.empty() ? "" : "; stack:\n" + stack));
    ++scoreboard.pool().kills_by_timeout;
    stop(w, StopReason::Timeout);
  }

  if (state == State::Reloading && now >= reload_deadline_ns)
    abandon_reload("generation " + std::to_string(current_gen) + " not ready after " +
                   seconds_text(ns(current.pool.graceful_timeout)));
}

// Workers that run a request longer than nudge_after while holding other connections (kept
// connections, on which the web server may send a request that would wait for this one) are
// nudged once per request; the worker decides whether another worker is free to take them.
void Master::Impl::nudge_slow_workers() {
  if (table.all().size() < 2) return;
  std::uint64_t now = monotonic_ns();
  for (Worker& w : table.all()) {
    if (w.nudge_after.count() == 0 || w.was_signalled(SIGKILL)) continue;
    const WorkerSlot& s = scoreboard.slot(w.slot);
    std::uint64_t start = s.request_start_ns.load(std::memory_order_relaxed);
    if (start == 0 || start == w.nudged_request_ns || now < start ||
        now - start <= ns(w.nudge_after) || s.connections.load(std::memory_order_relaxed) < 2)
      continue;
    w.nudged_request_ns = start;
    ::kill(w.pid, signals::nudge_signal());
  }
}

// --slow-request-threshold: the worker's stack while its request is still running, once per
// request (the worker logs the request again when it ends, with its duration and status).
void Master::Impl::take_slow_request_stacks() {
  std::uint64_t now = monotonic_ns();
  for (Worker& w : table.all()) {
    if (w.slow_stack_after.count() == 0 || w.was_signalled(SIGKILL)) continue;
    const WorkerSlot& s = scoreboard.slot(w.slot);
    std::uint64_t start = s.request_start_ns.load(std::memory_order_relaxed);
    if (!in_request(s.state) || start == 0 || start == w.slow_stack_request_ns || now < start ||
        now - start <= ns(w.slow_stack_after) ||
        s.crash_state.load(std::memory_order_acquire) != CrashState::None) // not slow: crashed
      continue;
    w.slow_stack_request_ns = start;
    if (now - slow_window_ns >= ns(std::chrono::minutes(1))) {
      slow_window_ns = now;
      slow_stacks = 0;
    }
    if (slow_stacks == kSlowStacksPerMinute) {
      ++slow_skipped;
      continue;
    }
    ++slow_stacks;
    Scoreboard::RequestInfo r = Scoreboard::read_request(s);
    // The handler runs on the worker's main thread, whose id is the pid.
    std::string stack = worker_frames(capture_stack(w.pid, kForensicStackBudget, w.pid));
    if (!stack.empty() && stack.back() == '\n') stack.pop_back();
    unsigned not_taken = std::exchange(slow_skipped, 0);
    std::string skipped =
        not_taken == 0 ? "" : " (" + std::to_string(not_taken) + " more not taken this minute)";
    PM_LOG(LogLevel::Warn, "slow request in flight: " + name(w) + ", \"" + r.method + " " + r.uri +
                               "\", request id " + r.request_id + ", running for " +
                               seconds_text(now - start) + " (slow-request-threshold " +
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
    if (w.nudge_after.count() != 0 &&
        scoreboard.slot(w.slot).connections.load(std::memory_order_relaxed) >= 2)
      return std::min(kTick, std::max(std::chrono::milliseconds{1}, w.nudge_after / 2));
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
  std::size_t active = table.count_active(current_gen) + held.size();
  // TTOU: give up a held slot first, then retire the newest worker; the older ones hold the
  // warmer caches.
  for (; active > static_cast<std::size_t>(current.pool.workers) && !held.empty(); --active) {
    table.release_slot(held.back().slot);
    held.pop_back();
  }
  for (; active > static_cast<std::size_t>(current.pool.workers); --active) {
    Worker* newest = nullptr;
    for (Worker& w : table.all())
      if (w.generation == current_gen && !w.stopping() &&
          (!newest || w.started_at_ns > newest->started_at_ns))
        newest = &w;
    stop(*newest, StopReason::Retire);
  }
  if (monotonic_ns() < crashes.pool_respawn_at_ns()) return; // breaker pause, failed spawns
  respawn_held_slots();
  for (; active < static_cast<std::size_t>(current.pool.workers); ++active)
    if (!spawn_worker()) break;
  announce_ready();
}

// Dynamic and ondemand pools (php-fpm's semantics), decided from the scoreboard on every turn:
// the target `workers` moves with the idle count. A worker still starting counts as a spare on
// its way, so that one slow boot does not spawn a crowd.
void Master::Impl::scale() {
  PoolSettings& p = current.pool;
  if (p.mode == PoolMode::Static) return;
  std::uint64_t now = monotonic_ns();
  int active = 0, idle = 0, starting = 0;
  Worker* idlest = nullptr;
  for (Worker& w : table.all()) {
    if (w.generation != current_gen || w.stopping()) continue;
    ++active;
    const WorkerSlot& s = scoreboard.slot(w.slot);
    std::uint64_t requests = s.requests;
    if (s.state == WorkerState::Starting) {
      ++starting;
    } else if (is_waiting(s.state)) {
      ++idle;
      if (w.idle_since_ns == 0 || requests != w.requests_seen) w.idle_since_ns = now;
      if (!idlest || w.idle_since_ns < idlest->idle_since_ns) idlest = &w;
    } else {
      w.idle_since_ns = 0;
    }
    w.requests_seen = requests;
  }
  int max = p.max_workers > 0 ? p.max_workers : std::max(p.workers, 1);
  bool queued = std::exchange(connection_queued, false);
  if (p.mode == PoolMode::Dynamic) {
    if (idle + starting < p.min_spare && active < max) {
      p.workers = std::min(max, std::max(p.workers, active + p.min_spare - idle - starting));
    } else if (idle > p.max_spare && idlest) { // one per turn, the one idle longest
      stop(*idlest, StopReason::Retire);
      p.workers = active - 1;
    }
    return;
  }
  // OnDemand.
  if (queued && idle == 0 && starting == 0 && active < max) p.workers = active + 1;
  for (Worker& w : table.all())
    if (w.generation == current_gen && !w.stopping() && w.idle_since_ns != 0 &&
        now - w.idle_since_ns > ns(p.idle_timeout) && is_waiting(scoreboard.slot(w.slot).state)) {
      stop(w, StopReason::Retire);
      p.workers = std::max(0, p.workers - 1);
    }
}

// The listen socket stays readable while a connection waits: watched only when a connection
// waiting means "spawn one" (ondemand, no worker idle or starting), or the loop would spin.
std::vector<int> Master::Impl::watched_fds() const {
  std::vector<int> fds = options.watch_fds;
  if (upgrade_fd >= 0) fds.push_back(upgrade_fd);
  if (current.pool.mode != PoolMode::OnDemand || options.listen_fd < 0 || !can_spawn(state))
    return fds;
  int active = 0;
  for (const Worker& w : table.all()) {
    if (w.generation != current_gen || w.stopping()) continue;
    ++active;
    WorkerState s = scoreboard.slot(w.slot).state;
    if (is_waiting(s) || s == WorkerState::Starting) return fds;
  }
  int max = current.pool.max_workers > 0 ? current.pool.max_workers : 1;
  if (active < max) fds.push_back(options.listen_fd);
  return fds;
}

void Master::Impl::on_readable(int fd) {
  if (fd == upgrade_fd)
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
  std::size_t total = 0, ready_count = 0;
  for (const Worker& w : table.all())
    if (w.generation == current_gen && !w.stopping()) {
      ++total;
      ready_count += ready(w);
    }
  if (total < static_cast<std::size_t>(current.pool.workers) || ready_count < total) return;
  announced_ready = true;
  ready_gen = std::max(ready_gen, current_gen);
  notifier.notify("READY=1");
  if (options.ready_fd >= 0) {
    [[maybe_unused]] ssize_t n = ::write(options.ready_fd, "R", 1);
    ::close(options.ready_fd);
  }
  PM_LOG(LogLevel::Info, "generation " + std::to_string(current_gen) + " ready");
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
  if (upgrade_fd >= 0) master_fds.push_back(upgrade_fd);
  pid_t pid = spawner.spawn(*slot, current_gen, current.worker_main, master_fds);
  if (pid == -1) {
    table.release_slot(*slot);
    spawn_failed(std::string("fork() failed: ") + std::strerror(errno));
    return false;
  }
  Worker w;
  w.pid = pid;
  w.slot = *slot;
  w.generation = current_gen;
  w.started_at_ns = monotonic_ns();
  w.graceful_timeout = current.pool.graceful_timeout;
  w.request_timeout = current.pool.request_timeout;
  w.retire_signal = current.pool.retire_signal;
  w.reopen_logs_signal = current.pool.reopen_logs_signal;
  w.stack_trace_on_timeout = current.pool.stack_trace_on_timeout;
  w.resend_stop_every = current.pool.resend_stop_every;
  w.nudge_after = current.pool.nudge_after;
  w.boot_window = current.pool.boot_window;
  w.slow_stack_after = current.pool.slow_stack_after;
  table.add(w);
  PM_LOG(LogLevel::Info, name(w) + " spawned");
  return true;
}

// A worker is ready once it has left Starting (the worker loop sets Idle before its first accept).
bool Master::Impl::ready(const Worker& w) const {
  WorkerState s = scoreboard.slot(w.slot).state;
  return s != WorkerState::Starting && s != WorkerState::Free;
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
  std::size_t total = 0, ready_count = 0;
  for (const Worker& w : table.all())
    if (w.generation == current_gen && !w.stopping()) {
      ++total;
      ready_count += ready(w);
    }
  if (total < static_cast<std::size_t>(current.pool.workers) || ready_count < total) return;
  ready_gen = std::max(ready_gen, current_gen);
  std::size_t retired = 0;
  for (Worker& w : table.all())
    if (w.generation != current_gen && !w.stopping()) {
      stop(w, StopReason::Retire);
      ++retired;
    }
  PM_LOG(LogLevel::Notice, "generation " + std::to_string(current_gen) + " ready; retiring " +
                               std::to_string(retired) + " worker(s) of older generations");
  if (current.pool.reload_grace.count() > 0 && previous) { // kept until the grace is over
    fallback = std::move(previous);
    fallback_gen = previous_gen;
    grace.start(current_gen, monotonic_ns(), current.pool.reload_grace);
  }
  end_reload();
}

void Master::Impl::abandon_reload(const std::string& why, const std::string& block) {
  PM_LOG(LogLevel::Error, why + "; abandoning generation " + std::to_string(current_gen) +
                              ", keeping generation " + std::to_string(previous_gen) + block);
  for (Worker& w : table.all())
    if (w.generation == current_gen) // those already serving finish their requests
      stop(w, ready(w) ? StopReason::Retire : StopReason::Abandon);
  current = std::move(*previous);
  current_gen = previous_gen;
  end_reload();
}

void Master::Impl::end_reload() {
  previous.reset();
  state = State::Running;
  if (announced_ready) notifier.notify("READY=1");
  if (std::exchange(reload_queued, false)) on_hup();
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
