#pragma once
// The master: preforks workers, supervises them, reloads by generations. It never touches a
// client connection and knows nothing of FastCGI: the worker's entry point is a callable.
#include "process_manager/generations.hpp"
#include "process_manager/rollout.hpp"
#include "process_manager/scoreboard.hpp"

#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace process_manager {

struct MasterOptions {
  // Number of scoreboard slots: the most workers of all generations alive at once.
  std::size_t scoreboard_capacity = 1024;
  // Request slots per worker (the most handler threads a worker of any generation runs), and
  // the host's area beside each worker's slot (scoreboard.hpp).
  std::size_t scoreboard_threads = 1;
  HostArea host_area;
  // HUP: parse the configuration again. Returns nullopt when it is bad (the callee logs why);
  // the master then keeps running the current generation.
  std::function<std::optional<Generation>()> reload;
  // USR1: reopen log files (the master also signals workers to do the same).
  std::function<void()> reopen_logs;
  // After reopen_logs: the descriptors handed to every worker in place of its own (at most
  // kMaxHandedLogs, by position, -1 for none: log_handover.hpp). Unset: workers reopen their
  // logs themselves, which a worker of another user than the master cannot.
  std::function<std::vector<int>()> log_fds;
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
  // A worker was reaped (its pid, which the kernel may now give to another process): the place
  // to free what the master kept for it (the output capture's unfinished line).
  std::function<void(pid_t pid)> on_worker_reaped;
  // Fds of the master that no worker may keep (a locked pidfile: a worker holding it would keep
  // the lock after the master is gone). Closed in every worker right after fork.
  std::vector<int> private_fds;
  // A worker died of a SIGKILL the master did not send: the OOM killer's note for its exit line
  // ("killed by the OOM killer (memory-max 512M)", counted in PoolCounters::oom_kills), or empty
  // when it was not that (oom_watch.hpp). Unset: never asked.
  std::function<std::string()> oom_kill_note;
  // --rollout canary: a worker's figures (slot `slot`'s: requests, 5xx, durations in buckets with
  // the upper bounds latency_bounds_ns, at most kFigureBuckets - 1 of them), summed per
  // generation over a rollout's window (rollout.hpp). Unset: a canary is judged by its crashes.
  std::function<ServedFigures(const Scoreboard&, std::size_t slot)> served_figures;
  std::vector<std::uint64_t> latency_bounds_ns;
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
