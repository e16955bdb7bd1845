#pragma once
// The master: preforks workers, supervises them, reloads by generations. It never touches a
// client connection and knows nothing of FastCGI: the worker's entry point is a callable.
#include "process_manager/scoreboard.hpp"
#include "process_manager/worker_context.hpp"

#include <chrono>
#include <csignal>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace process_manager {

// How the pool size follows the load (php-fpm's pm = static | dynamic | ondemand).
enum class PoolMode {
  Static,   // always `workers`
  Dynamic,  // starts with `workers`; keeps min_spare..max_spare idle, at most max_workers
  OnDemand, // starts with none; spawns when a connection waits and no worker is idle, stops
            // workers idle longer than idle_timeout; at most max_workers
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
};

// What one generation runs. On HUP the master asks for a new one; the old one drains.
struct Generation {
  PoolSettings pool;
  // Runs in the child; its return value is the child's exit code (see exit_codes.hpp). It
  // must catch everything: the child calls _exit() with the result and never unwinds into
  // the master's stack.
  std::function<int(const WorkerContext&)> worker_main;
};

struct MasterOptions {
  // Number of scoreboard slots: the most workers of all generations alive at once.
  std::size_t scoreboard_capacity = 1024;
  // HUP: parse the configuration again. Returns nullopt when it is bad (the callee logs why);
  // the master then keeps running the current generation.
  std::function<std::optional<Generation>()> reload;
  // USR1: reopen log files (the master also signals workers to do the same).
  std::function<void()> reopen_logs;
  // Extra fds the master loop waits on (a status socket the master serves itself), and what to
  // do when one is readable. Called from the loop, never from a signal handler.
  std::vector<int> watch_fds;
  std::function<void(int fd)> on_readable;
  // The listen socket. OnDemand watches it, only while no worker is idle or starting (it stays
  // readable while connections wait), to spawn a worker for a queued connection.
  int listen_fd = -1;
  // USR2, binary upgrade: runs in a forked child of the master (default signal dispositions, empty
  // mask) and execs the new binary, handing it the listen socket and `ready_fd`. Returns only if
  // the exec failed. Unset: USR2 is logged and ignored.
  std::function<void(int ready_fd)> upgrade_exec;
  // After USR2: true once the new master wrote its ready byte (this master then retires its
  // workers and exits 0), false when it exited or failed before that.
  std::function<void(bool taken_over)> on_upgrade;
  // Called once when a stop (TERM, QUIT, INT, a boot failure, or retiring after an upgrade)
  // begins, before any worker is signalled: the place to refuse new connections (remove the
  // socket path, close the master's copy of the listen socket). listen_fd is not used after it.
  std::function<void()> on_stop;
  // Fds of the master that no worker may keep (a locked pidfile: a worker holding it would keep
  // the lock after the master is gone). Closed in every worker right after fork.
  std::vector<int> private_fds;
  // A worker died of a SIGKILL the master did not send: the OOM killer's note for its exit line
  // ("killed by the OOM killer (memory-max 512M)", counted in PoolCounters::oom_kills), or empty
  // when it was not that (oom_watch.hpp). Unset: never asked.
  std::function<std::string()> oom_kill_note;
  // The new master's side of an upgrade: one byte is written here (then closed) once the first
  // generation is ready. -1: not started by an upgrade.
  int ready_fd = -1;
};

class Master {
public:
  Master(Generation first, MasterOptions options);
  ~Master();
  Master(const Master&) = delete;
  Master& operator=(const Master&) = delete;

  // Runs until stopped. Returns the process exit code (exit_codes.hpp).
  int run();

  Scoreboard& scoreboard();

  // Sets the current generation's workers (dynamic, ondemand: its most workers) to `n` (at least
  // 1), as that many TTINs or TTOUs would. Returns the new count.
  int resize(int n);

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace process_manager
