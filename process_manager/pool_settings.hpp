#pragma once
// What one generation's pool is: its size rule (php-fpm's pm), its stop and timeout rules, the
// signals its workers take. Filled from the options by cli/settings_from_config.cpp; read by the
// master and its policies (pool_sizing.hpp, generations.hpp, worker_deadlines.hpp).
#include <chrono>
#include <csignal>

namespace process_manager {

// How the pool size follows the load (php-fpm's pm = static | dynamic | ondemand).
enum class PoolMode {
  Static,   // always `workers`
  Dynamic,  // starts with `workers`; keeps min_spare..max_spare idle, at most max_workers
  OnDemand, // starts with none; spawns when a connection waits and no worker is idle, stops
            // workers idle longer than idle_timeout; at most max_workers
};

// --rollout: how a reload replaces the workers (rollout.hpp). All: the new generation replaces
// every worker once it is ready. Canary: it starts on `canary_workers` beside the old generation
// and is judged against it over `window`, then promoted `step` workers at a time or undone.
enum class RolloutMode { All, Canary };

struct RolloutSettings {
  RolloutMode mode = RolloutMode::All;
  int canary_workers = 1;
  std::chrono::milliseconds window{30'000};
  double undo_on_errors = 0.02; // the canary's 5xx share above the old one's by more: undone
  double undo_on_latency = 2;   // the canary's p99 above this many times the old one's: undone
  int step = 0;                 // 0: a quarter of the pool (at least 1)
};

struct PoolSettings {
  int workers = 1;
  PoolMode mode = PoolMode::Static;
  int min_spare = 1;
  int max_spare = 3;
  int max_workers = 0; // dynamic and ondemand; 0: `workers`
  std::chrono::milliseconds idle_timeout{10'000};
  // TERM/QUIT and reload: how long in-flight requests may take before SIGKILL.
  std::chrono::milliseconds graceful_timeout{30'000};
  // 0 = off. A worker whose slot shows one request running longer is killed (SIGKILL) and
  // replaced.
  std::chrono::milliseconds request_timeout{0};
  // Signals for workers that are not the host's own (--exec): libfcgi programs die on QUIT, take
  // TERM (or USR1) as "finish the current request, then exit", and would stop on a USR1 meant as
  // "reopen logs" (0: do not send it).
  int retire_signal = SIGQUIT;
  int reopen_logs_signal = SIGUSR1;
  // Repeat the stop signal this often until the worker exits (0: once). libfcgi only looks at
  // its shutdown flag when accept() is interrupted: a TERM that arrived during a request leaves
  // the program blocked in its next accept() until another signal comes.
  std::chrono::milliseconds resend_stop_every{0};
  // Log a stack trace (eu-stack or gdb, at most ~1 s) of a worker before a request-timeout kill.
  bool stack_trace_on_timeout = true;
  // 0 = off. A worker whose slot shows one request running longer gets its stack taken once for
  // that request (php-fpm's request_slowlog_timeout, native frames), while the request goes on;
  // at most kSlowStacksPerMinute of them a minute.
  std::chrono::milliseconds slow_stack_after{0};
  // 0 = off. A worker whose slot shows one request running longer while it holds other
  // connections gets signals::nudge_signal() once for that request (it may pass them on). While
  // any worker holds more than one connection, the master looks every millisecond.
  std::chrono::milliseconds nudge_after{0};
  // 0: a worker says it is ready in its slot (the host's own workers). Otherwise (--exec: a
  // program that cannot) the master takes it as ready once it has lived this long; a death
  // before that is a boot failure while its generation was never ready (worker_exit.hpp).
  std::chrono::milliseconds boot_window{0};
  // After a reload: a new generation whose workers crash kGraceCrashes times within this long
  // is replaced by the previous generation's configuration again (0: off).
  std::chrono::milliseconds reload_grace{0};
  RolloutSettings rollout;
};

} // namespace process_manager
