#include "process_manager/master.hpp"

#include "process_manager/backoff.hpp"
#include "process_manager/clock.hpp"
#include "process_manager/exit_codes.hpp"
#include "process_manager/log.hpp"
#include "process_manager/master_state.hpp"
#include "process_manager/reaper.hpp"
#include "process_manager/signal_pipe.hpp"
#include "process_manager/signals.hpp"
#include "process_manager/spawner.hpp"
#include "process_manager/worker_table.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>

namespace process_manager {

namespace {

// Short enough that timeouts fire on time, long enough that an idle master costs nothing.
constexpr std::chrono::milliseconds kTick{100};

std::uint64_t ns(std::chrono::milliseconds ms) {
  return static_cast<std::uint64_t>(std::chrono::nanoseconds(ms).count());
}

std::string seconds(std::uint64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f s", static_cast<double>(ns) / 1e9);
  return buf;
}

std::string name(const Worker& w) {
  return "worker " + std::to_string(w.pid) + " (gen " + std::to_string(w.generation) + ", slot " +
         std::to_string(w.slot) + ")";
}

bool in_request(WorkerState s) {
  return s == WorkerState::Reading || s == WorkerState::Handling || s == WorkerState::Writing;
}

} // namespace

struct Master::Impl {
  Impl(Generation first, MasterOptions opts)
      : options(std::move(opts)), scoreboard(options.scoreboard_capacity),
        spawner(scoreboard, signals), table(options.scoreboard_capacity),
        current(std::move(first)) {}
  ~Impl();

  int run();

  // The steps of the loop.
  void start();
  void dispatch(int sig);
  void reap();
  void enforce_timeouts();
  void maintain_pool();

  // One per signal (signals.hpp has the table).
  void on_term();
  void on_int();
  void on_hup();
  void on_usr1();
  void on_usr2();
  void on_ttin();
  void on_ttou();
  void on_chld();

  void begin_stop(State to, StopReason reason);
  void stop(Worker& w, StopReason reason);
  void send(Worker& w, int sig);
  void on_exit(const Worker& w, const ExitedChild& c, std::uint64_t requests);
  void on_boot_failure(const Worker& w, const std::string& line);
  void count_crash(LogLevel level, const std::string& line);
  bool spawn_worker();
  void advance_reload();
  void abandon_reload(const std::string& why);
  void end_reload();
  bool ready(const Worker& w) const;

  pid_t master_pid = getpid(); // again in start(): a Master may be built before a fork
  MasterOptions options;
  Scoreboard scoreboard;
  SignalPipe signals;
  Spawner spawner;
  Reaper reaper;
  WorkerTable table;
  CrashPolicy crashes;

  State state = State::Running;
  int exit_code = exit_code::kOk;
  // The generation the pool is kept at. During a reload, `previous` is the one still serving,
  // kept so that a failed reload can fall back to it.
  Generation current;
  std::uint32_t current_gen = 1;
  std::optional<Generation> previous;
  std::uint32_t previous_gen = 0;
  std::uint32_t last_gen = 1;
  std::uint64_t reload_deadline_ns = 0;
  bool reload_queued = false;
};

int Master::Impl::run() {
  start();
  std::vector<int> ready;
  for (;;) {
    for (int sig : signals.wait(kTick, options.watch_fds, &ready)) // a signal, a tick, or
      dispatch(sig);                                               // -> on_term(), on_hup(), ...
    for (int fd : ready) // a watched fd (the status socket)
      options.on_readable(fd);
    reap();                      // collect exits, then account for them
    enforce_timeouts();          // stop deadlines, request_timeout, reload deadline
    if (state == State::Stopped) // every worker is gone
      return exit_code;          // kOk, or kFailure after a boot failure
    maintain_pool();             // finish a reload; spawn or retire to the target
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
  std::optional<Generation> next;
  try {
    if (options.reload) next = options.reload();
  } catch (const std::exception& e) {
    PM_LOG(LogLevel::Error, std::string("reload: ") + e.what());
  }
  if (!next) {
    PM_LOG(LogLevel::Error, "reload failed, keeping generation " + std::to_string(current_gen));
    return;
  }
  previous = std::move(current);
  previous_gen = current_gen;
  current = std::move(*next);
  current_gen = ++last_gen;
  state = State::Reloading;
  reload_deadline_ns = monotonic_ns() + ns(current.pool.graceful_timeout);
  PM_LOG(LogLevel::Notice, "HUP: starting generation " + std::to_string(current_gen) + " (" +
                               std::to_string(current.pool.workers) + " worker(s))");
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
    if (!w.stopping() && ready(w)) ::kill(w.pid, signals::kWorkerReopenLogs);
  PM_LOG(LogLevel::Notice, "USR1: logs reopened");
}

// USR2: binary upgrade.
void Master::Impl::on_usr2() {
  PM_LOG(LogLevel::Warn, "USR2: binary upgrade not supported yet");
}

// TTIN: one worker more in the current generation.
void Master::Impl::on_ttin() {
  ++current.pool.workers;
  PM_LOG(LogLevel::Notice, "TTIN: " + std::to_string(current.pool.workers) + " worker(s)");
}

// TTOU: one worker less in the current generation, never below one.
void Master::Impl::on_ttou() {
  if (current.pool.workers > 1) --current.pool.workers;
  PM_LOG(LogLevel::Notice, "TTOU: " + std::to_string(current.pool.workers) + " worker(s)" +
                               (current.pool.workers == 1 ? ", the minimum" : ""));
}

// CHLD: nothing to do here; reap() runs on every turn of the loop, signal or not.
void Master::Impl::on_chld() {}

void Master::Impl::begin_stop(State to, StopReason reason) {
  if (!can_override(state, to)) return; // a second TERM adds nothing
  PM_LOG(LogLevel::Notice,
         std::string(to_string(reason)) + " of " + std::to_string(table.size()) + " worker(s)");
  state = to;
  reload_queued = false;
  for (Worker& w : table.all())
    stop(w, reason);
}

void Master::Impl::stop(Worker& w, StopReason reason) {
  Escalation e = escalation(reason, w.graceful_timeout);
  w.stop_reason = reason;
  send(w, e.signal);
  if (e.signal == SIGKILL) return;
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
    std::uint64_t requests = s.requests;
    s.request_start_ns = 0;
    s.pid = 0;
    s.state = WorkerState::Free;
    on_exit(*w, c, requests);
  }
  if ((state == State::Stopping || state == State::FastStopping) && table.empty()) {
    state = State::Stopped;
    PM_LOG(LogLevel::Notice,
           "all workers gone; master exits with code " + std::to_string(exit_code));
  }
}

void Master::Impl::on_exit(const Worker& w, const ExitedChild& c, std::uint64_t requests) {
  std::string line = name(w) + " " + describe(c) + " after " +
                     seconds(monotonic_ns() - w.started_at_ns) + ", " + std::to_string(requests) +
                     " requests";
  bool clean = c.kind == ExitedChild::Kind::Exited && c.code == exit_code::kWorkerDone;
  if (w.stopping()) { // we asked for it: a request-timeout kill is respawned at once, no backoff
    PM_LOG(clean || w.stop_reason != StopReason::Timeout ? LogLevel::Notice : LogLevel::Warn,
           line + " (" + to_string(*w.stop_reason) + ")");
  } else if (clean) { // recycled: maintain_pool() respawns at once
    PM_LOG(LogLevel::Notice, line);
  } else if (c.kind == ExitedChild::Kind::Exited && c.code == exit_code::kWorkerBootFailure) {
    on_boot_failure(w, line);
  } else {
    count_crash(c.kind == ExitedChild::Kind::Signaled ? LogLevel::Error : LogLevel::Warn, line);
  }
}

void Master::Impl::on_boot_failure(const Worker& w, const std::string& line) {
  std::string what = "worker " + std::to_string(w.pid) + " failed to boot (exit code " +
                     std::to_string(exit_code::kWorkerBootFailure) + ")";
  if (w.generation != current_gen) { // an abandoned or retired generation: nothing depends on it
    PM_LOG(LogLevel::Error, line);
  } else if (state == State::Reloading && table.count_active_except(current_gen) > 0) {
    abandon_reload(what);
  } else { // respawning would only fail again, in a loop
    PM_LOG(LogLevel::Error, what + "; stopping");
    exit_code = exit_code::kFailure;
    begin_stop(State::Stopping, StopReason::Graceful);
  }
}

// Crashes and failed spawns: backoff, one breaker line, at most one line per second.
void Master::Impl::count_crash(LogLevel level, const std::string& line) {
  CrashPolicy::Decision d = crashes.on_crash(monotonic_ns());
  if (d.log)
    PM_LOG(level,
           line + (d.suppressed ? "; " + std::to_string(d.suppressed) + " more crashes suppressed"
                                : std::string()));
  if (d.breaker_tripped) {
    const auto& s = crashes.settings();
    PM_LOG(LogLevel::Error, "crash loop: more than " + std::to_string(s.breaker_crashes) +
                                " crashes within " + seconds(ns(s.breaker_window)) +
                                "; respawning paused for " + seconds(ns(s.breaker_pause)));
  }
}

void Master::Impl::enforce_timeouts() {
  std::uint64_t now = monotonic_ns();
  std::size_t killed = 0;
  std::string pids;
  for (Worker& w : table.all()) {
    if (w.kill_at_ns != 0 && now >= w.kill_at_ns && !w.was_signalled(SIGKILL)) {
      send(w, SIGKILL);
      ++killed;
      pids += " " + std::to_string(w.pid);
    }
  }
  if (killed > 0)
    PM_LOG(LogLevel::Warn, "SIGKILL to " + std::to_string(killed) +
                               " worker(s) still running after their stop timeout:" + pids);

  for (Worker& w : table.all()) {
    const WorkerSlot& s = scoreboard.slot(w.slot);
    std::uint64_t start = s.request_start_ns;
    if (w.request_timeout.count() == 0 || w.was_signalled(SIGKILL) || !in_request(s.state) ||
        start == 0 || now < start || now - start <= ns(w.request_timeout))
      continue;
    Scoreboard::RequestInfo r = Scoreboard::read_request(s);
    PM_LOG(LogLevel::Error, name(w) + " killed: request \"" + r.method + " " + r.uri +
                                "\" ran for " + seconds(now - start) + " (request_timeout " +
                                seconds(ns(w.request_timeout)) + ")");
    stop(w, StopReason::Timeout);
  }

  if (state == State::Reloading && now >= reload_deadline_ns)
    abandon_reload("generation " + std::to_string(current_gen) + " not ready after " +
                   seconds(ns(current.pool.graceful_timeout)));
}

void Master::Impl::maintain_pool() {
  if (state == State::Reloading) advance_reload();
  if (!can_spawn(state)) return;
  std::size_t active = table.count_active(current_gen);
  // TTOU: retire the newest worker; the older ones hold the warmer caches.
  for (; active > static_cast<std::size_t>(current.pool.workers); --active) {
    Worker* newest = nullptr;
    for (Worker& w : table.all())
      if (w.generation == current_gen && !w.stopping() &&
          (!newest || w.started_at_ns > newest->started_at_ns))
        newest = &w;
    stop(*newest, StopReason::Retire);
  }
  if (monotonic_ns() < crashes.respawn_at_ns()) return; // backoff or breaker pause
  for (; active < static_cast<std::size_t>(current.pool.workers); ++active)
    if (!spawn_worker()) break;
}

bool Master::Impl::spawn_worker() {
  std::optional<std::size_t> slot = table.allocate_slot();
  if (!slot) {
    count_crash(LogLevel::Error, "no free scoreboard slot for a worker (capacity " +
                                     std::to_string(scoreboard.capacity()) + ")");
    return false;
  }
  pid_t pid = spawner.spawn(*slot, current_gen, current.worker_main);
  if (pid == -1) {
    table.release_slot(*slot);
    count_crash(LogLevel::Error, std::string("fork() failed: ") + std::strerror(errno));
    return false;
  }
  Worker w;
  w.pid = pid;
  w.slot = *slot;
  w.generation = current_gen;
  w.started_at_ns = monotonic_ns();
  w.graceful_timeout = current.pool.graceful_timeout;
  w.request_timeout = current.pool.request_timeout;
  table.add(w);
  PM_LOG(LogLevel::Info, name(w) + " spawned");
  return true;
}

// A worker is ready once it has left Starting (the worker loop sets Idle before its first accept).
bool Master::Impl::ready(const Worker& w) const {
  WorkerState s = scoreboard.slot(w.slot).state;
  return s != WorkerState::Starting && s != WorkerState::Free;
}

void Master::Impl::advance_reload() {
  std::size_t total = 0, ready_count = 0;
  for (const Worker& w : table.all())
    if (w.generation == current_gen && !w.stopping()) {
      ++total;
      ready_count += ready(w);
    }
  if (total < static_cast<std::size_t>(current.pool.workers) || ready_count < total) return;
  std::size_t retired = 0;
  for (Worker& w : table.all())
    if (w.generation != current_gen && !w.stopping()) {
      stop(w, StopReason::Retire);
      ++retired;
    }
  PM_LOG(LogLevel::Notice, "generation " + std::to_string(current_gen) + " ready; retiring " +
                               std::to_string(retired) + " worker(s) of older generations");
  end_reload();
}

void Master::Impl::abandon_reload(const std::string& why) {
  PM_LOG(LogLevel::Error, why + "; abandoning generation " + std::to_string(current_gen) +
                              ", keeping generation " + std::to_string(previous_gen));
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

} // namespace process_manager
