#pragma once
// Log rotation for workers that are not root. After logrotate renames the logs, USR1 makes the
// master open them again (with its path checks: path_checks.hpp); a worker running as another
// user could not, the new files being root's in a root-only directory. So the master hands the
// new descriptors to each worker over a channel of its own (SCM_RIGHTS on a socket pair made at
// fork), and the worker puts them in place of its old ones with dup3: the descriptor numbers the
// access log and the error log write to never change, the request path is untouched, and no line
// is lost (a line written before the swap lands in the rotated file). Nothing is made writable by
// the workers' user. The channel goes one way only: the master never reads what a worker writes.
#include <array>
#include <cstddef>
#include <span>

namespace process_manager {

// The most descriptors one message carries (the error log, the access log).
inline constexpr std::size_t kMaxHandedLogs = 4;

// The master's end of one worker's channel (owned, closed with it). The worker's end is handed
// to the forked worker (WorkerContext::log_channel) and closed in the master right after fork.
class LogHandover {
public:
  LogHandover() = default;
  ~LogHandover() { close(); }
  LogHandover(LogHandover&& other) noexcept;
  LogHandover& operator=(LogHandover&& other) noexcept;
  LogHandover(const LogHandover&) = delete;
  LogHandover& operator=(const LogHandover&) = delete;

  // A new channel (both ends close-on-exec and non-blocking). Invalid, with errno set, when the
  // socket pair cannot be made: the worker then reopens its logs itself, as before.
  static LogHandover make();
  bool valid() const { return master_fd_ >= 0; }
  int master_fd() const { return master_fd_; }
  int worker_fd() const { return worker_fd_; }
  // In the master, once the worker is forked.
  void close_worker_end();

  // Sends `fds` by position in one message, -1 for "none at this position" (at most
  // kMaxHandedLogs). False when the worker has left unread messages enough to fill its channel,
  // or has gone: it keeps the files it has.
  bool send(std::span<const int> fds) const;

private:
  void close();
  int master_fd_ = -1;
  int worker_fd_ = -1;
};

// The worker's side: what the master last handed, by position (-1: none there). Owns the
// descriptors it holds; take() gives one away.
class HandedLogs {
public:
  HandedLogs() { fds_.fill(-1); }
  ~HandedLogs();
  HandedLogs(const HandedLogs&) = delete;
  HandedLogs& operator=(const HandedLogs&) = delete;

  // Reads every message waiting on `channel`, keeping the last one's descriptors (the older
  // ones are closed: a later rotation supersedes them). False when none was waiting.
  bool receive(int channel);
  // The descriptor at `position`, now the caller's; -1 when none.
  int take(std::size_t position);

private:
  void clear();
  std::array<int, kMaxHandedLogs> fds_;
};

} // namespace process_manager
