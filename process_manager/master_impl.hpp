#pragma once
// The master's insides, shared by its files (private to process_manager/, not installed). Each
// policy decides in a pure file of its own and is applied by one of these:
//
//   master.cpp          the loop, the signals' dispatch, stops, exits and respawn holds
//   master_pool.cpp     pool sizing (pool_sizing.hpp): scale, fit to the target, spawn, ready
//   master_reload.cpp   reload by generations (generations.hpp): HUP, ready, abandon, go back
//   master_rollout.cpp  canary rollouts (rollout.hpp): watch, judge, promote a step at a time, undo
//   master_timeouts.cpp timeouts and nudges (worker_deadlines.hpp): stop, kill, nudge, stacks
//   master_upgrade.cpp  binary upgrade (binary_upgrade.hpp): USR2 and the ready pipe
//   master_mold.cpp     the generations' molds (mold.hpp): start, restart, retire
#include "process_manager/backoff.hpp"
#include "process_manager/binary_upgrade.hpp"
#include "process_manager/exit_codes.hpp"
#include "process_manager/generations.hpp"
#include "process_manager/log.hpp"
#include "process_manager/master.hpp"
#include "process_manager/master_state.hpp"
#include "process_manager/mold.hpp"
#include "process_manager/pool_sizing.hpp"
#include "process_manager/reaper.hpp"
#include "process_manager/rollout.hpp"
#include "process_manager/signal_pipe.hpp"
#include "process_manager/spawner.hpp"
#include "process_manager/systemd_notify.hpp"
#include "process_manager/worker_deadlines.hpp"
#include "process_manager/worker_exit.hpp"
#include "process_manager/worker_table.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

namespace process_manager {

// The master's loop waits for the debugger: long enough for eu-stack or gdb, short enough that
// the other workers' timeouts and respawns are late by at most this.
inline constexpr std::chrono::milliseconds kStackTraceBudget{1000};
// A crashed or slow worker's stack: rarer (rate-limited), and worth more waiting for on a loaded
// machine, where a debugger reading the debug info of a big binary can take a second.
inline constexpr std::chrono::milliseconds kForensicStackBudget{3000};

// "worker 123 (gen 2, slot 0)", as every line about a worker names it.
inline std::string name(const Child& w) {
  return "worker " + std::to_string(w.pid) + " (gen " + std::to_string(w.generation) + ", slot " +
         std::to_string(w.slot) + ")";
}

struct Master::Impl {
  Impl(Generation first, MasterOptions opts)
      : options(std::move(opts)),
        scoreboard(options.scoreboard_capacity, options.scoreboard_threads, options.host_area),
        spawner(scoreboard, signals), table(options.scoreboard_capacity), gens(std::move(first)) {}
  ~Impl();

  int run();

  // The steps of the loop (master.cpp).
  void start();
  void dispatch(int sig);
  void reap();
  void take_crash_stacks();
  void note_unreported_crash(Child& w, const ExitedChild& c, const WorkerSlot& s);
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

  // Stops and exits (master.cpp, master_timeouts.cpp).
  void begin_stop(State to, StopReason reason);
  void stop(Child& w, StopReason reason);
  void stop_all(const std::vector<pid_t>& pids, StopReason reason);
  void send(Child& w, int sig);
  void on_exit(const Child& w, const ExitedChild& c, std::uint64_t requests, const ExitFacts& facts,
               const std::string& boot_error);
  void on_boot_failure(const Child& w, const ExitedChild& c, const std::string& line,
                       const std::string& why);
  void log_held_crash_count();
  void log_crash(LogLevel level, const std::string& line, const CrashPolicy::Decision& d,
                 const std::string& block = {});
  void spawn_failed(const std::string& line);
  void hold_for_respawn(const Child& w, std::uint64_t at_ns);
  void release_held_slots();
  void respawn_held_slots();
  std::chrono::milliseconds wait_time() const;

  // Timeouts (master_timeouts.cpp).
  void kill_past_stop_deadline(std::uint64_t now);
  void resend_stop_signals(std::uint64_t now);
  void kill_timed_out_requests(std::uint64_t now);

  // The pool (master_pool.cpp).
  bool spawn_worker(std::optional<std::size_t> held_slot = std::nullopt);
  bool ready(const Child& w) const;
  void mark_booted_by_time();
  void scale();
  void fit_pool();
  void announce_ready();
  std::vector<PoolMember> members() const; // also for watched_fds()

  // Reloads (master_reload.cpp).
  void advance_reload();
  void abandon_reload(const std::string& why, const std::string& block = {});
  void begin_reload(Generation next);
  void go_back(const std::string& why);
  void end_reload();
  void drop_current_generation();

  // Canary rollouts (master_rollout.cpp).
  void begin_rollout();
  void advance_rollout();
  void start_rollout_window();
  void judge_rollout();
  void promote_rollout_step();
  void undo_rollout(const std::string& why);
  void end_rollout(RolloutPhase outcome);
  ServedFigures rollout_figures(bool canary) const;
  void note_rollout_exit(const Child& w);
  void publish_rollout(bool now);
  bool rollout_holds_size(const char* what);

  // The upgrade (master_upgrade.cpp).
  void on_upgrade_pipe();

  // The molds (master_mold.cpp).
  Mold* keep_mold();
  void check_mold_boots();
  bool is_booting_mold(int fd) const;
  bool mold_can_fork() const; // true for a generation without a mold
  void on_mold_boot_failure(const std::string& why);
  bool on_mold_exit(const ExitedChild& c);
  void retire_molds();
  void publish_mold();
  std::size_t mold_slot() const { return options.scoreboard_capacity; } // its own backoff
  std::vector<int> master_only_fds() const;

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
  // --mold on: the molds of the current generation and, during a reload, the previous one;
  // the pids of those retired, until they are reaped; no mold restart before this.
  std::vector<std::unique_ptr<Mold>> molds;
  std::vector<pid_t> molds_leaving;
  std::uint64_t mold_restart_at_ns = 0;
  // The generations' kept copies (MoldPlan::Kept), which no child of the master may hold.
  std::vector<std::weak_ptr<MoldPlan::Kept>> mold_copies;

  State state = State::Running;
  int exit_code = exit_code::kOk;
  // The generation the pool is kept at, the one still serving during a reload, the one a reload
  // grace may go back to (generations.hpp).
  Generations gens;

  // The last reload's rollout: with --rollout canary, watched, then promoted or undone; with
  // all, only its outcome is published (the status page, `fcgi-host reload --wait`).
  struct Rollout {
    bool canary = false;
    RolloutPhase phase = RolloutPhase::None;
    std::uint32_t generation = 0;
    int full = 0;           // the new generation's workers once promoted
    int canary_workers = 0; // its workers while it is watched
    int step = 0;           // workers replaced at a time
    std::uint64_t window_end_ns = 0;
    unsigned extra_windows = 0;
    std::uint64_t published_ns = 0;
    RolloutWindow window;
    bool running() const {
      return phase == RolloutPhase::Starting || phase == RolloutPhase::Watching ||
             phase == RolloutPhase::Promoting;
    }
    bool active() const { return canary && running(); } // a canary rollout runs

  } rollout;

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

} // namespace process_manager
