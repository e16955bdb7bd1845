#pragma once
// Workers' stdout and stderr, captured into the log with the worker's pid. One Unix stream
// socketpair for the whole pool, made by the master before the first fork:
//   - each worker puts the write end on its fd 1 and 2. The end is non-blocking: when the master
//     falls behind and the socket buffer is full, a handler's write fails with EAGAIN (its output
//     is dropped) instead of blocking the worker. The worker's own log lines keep going straight
//     to the original stderr (or the log file), not through this socket;
//   - the master reads the other end in its loop (watch_fds), with SO_PASSCRED: the kernel tags
//     what each process wrote with its pid and never merges two writers' bytes in one read, so
//     each line is logged as "worker PID: line" without trusting the worker.
// Drops are not counted: the failing write is the handler's own, and nothing sees it. What the
// master keeps per writer is bounded and freed when the worker is reaped (forget()).
#include <map>
#include <string>
#include <sys/types.h>

namespace fcgi_host {

class OutputCapture {
public:
  // Throws std::system_error when the socketpair cannot be made.
  OutputCapture();
  ~OutputCapture();
  OutputCapture(const OutputCapture&) = delete;
  OutputCapture& operator=(const OutputCapture&) = delete;

  int read_fd() const { return read_fd_; }   // the master's end
  int write_fd() const { return write_fd_; } // for the workers

  // Master: the read end is readable. Logs the complete lines (a bounded amount per call).
  void drain();

  // Master: the worker `pid` was reaped. Its last bytes are read, its unfinished line logged and
  // forgotten: the master keeps nothing per worker past its life.
  void forget(pid_t pid);

  // Worker: puts `write_fd` on stdout and stderr; the log keeps the original stderr.
  static void attach(int write_fd);

private:
  void line(pid_t pid, std::string_view text);

  int read_fd_ = -1;
  int write_fd_ = -1;
  // A line not yet ended, per writer: at most kMaxLine bytes each and kMaxWriters of them (a
  // worker's children write here too, and are never reaped by the master: beyond the bound,
  // the oldest writer's line is logged as it is).
  std::map<pid_t, std::string> partial_;
};

} // namespace fcgi_host
