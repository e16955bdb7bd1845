#pragma once
// The signals a worker acts on — TERM (drain and stop), QUIT (stop), USR1 (reopen the logs) —
// never interrupt a handler: they stay blocked and are read from a signalfd that waits in the
// worker's epoll set beside its sockets. The master's own signals are ignored, should one reach
// a worker. The signalfd is closed with this object.
#include <signal.h>

namespace fcgi_host {

class WorkerSignals {
public:
  WorkerSignals() = default;
  ~WorkerSignals();
  WorkerSignals(const WorkerSignals&) = delete;
  WorkerSignals& operator=(const WorkerSignals&) = delete;

  // Blocks the three signals and opens the signalfd. False (errno set, `failed_call` named)
  // when it could not.
  bool open(const char*& failed_call);
  int fd() const { return fd_; }

  // The next signal taken off the signalfd; 0 when none is pending.
  int take();
  // Whether one of them is pending, without reading it: the fast path, which does not wait in
  // epoll, asks now and then (one rt_sigpending).
  bool pending() const;

private:
  sigset_t set_{};
  int fd_ = -1;
};

} // namespace fcgi_host
