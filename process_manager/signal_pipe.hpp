#pragma once
// The self-pipe: the master's signal handlers only write the signal number to a pipe, and the
// master loop reads it back in its own time. Moving to signalfd would change this file only.
#include <chrono>
#include <csignal>
#include <span>
#include <utility>
#include <vector>

namespace process_manager {

class SignalPipe {
public:
  // Creates the pipe (non-blocking, close-on-exec). Throws std::system_error.
  SignalPipe();
  // Restores the dispositions `install` replaced, then closes the pipe.
  ~SignalPipe();
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  // Routes `signals` to the pipe and unblocks them. One SignalPipe per process may be installed
  // at a time.
  void install(std::span<const int> signals);

  // Waits up to `timeout` for signals; returns them in arrival order (empty on timeout). Also
  // wakes up for the `watch` fds, listing those readable in `ready`.
  std::vector<int> wait(std::chrono::milliseconds timeout, std::span<const int> watch = {},
                        std::vector<int>* ready = nullptr);

  // In a forked child: close both ends without touching dispositions (the child resets those).
  void close_in_child();

private:
  int read_fd_ = -1;
  int write_fd_ = -1;
  std::vector<std::pair<int, struct sigaction>> saved_;
};

// Around fork(): block everything, fork, restore the saved mask in both processes, so that no
// handler of the master runs in the child before the child has reset the dispositions.
sigset_t block_all_signals();
void restore_signal_mask(const sigset_t& saved);

// In a forked child: every disposition back to SIG_DFL.
void reset_signal_dispositions();

} // namespace process_manager
