#pragma once
// USR2, binary upgrade, the old master's side: a child of the master execs the binary again,
// keeping the listen socket; once its first generation is ready it writes one byte to a pipe,
// and this master retires its workers and exits. Until then both serve the one socket. The
// decisions are pure and unit-tested (why_not_upgrade(), ready_outcome()); the new master's side
// is write_ready_byte(). What crosses exec besides the pipe is the program's business
// (MasterOptions::upgrade_exec; fcgi-host's is fcgi_host/cli/upgrade_handover.hpp).
#include "process_manager/master_state.hpp"
#include "process_manager/signal_pipe.hpp"

#include <functional>
#include <optional>
#include <string>
#include <sys/types.h>

namespace process_manager {

// The line a USR2 that cannot start an upgrade now is logged with (a warning); nullopt: go on.
std::optional<std::string> why_not_upgrade(bool supported, bool in_progress, State state);

// What the ready pipe said: read() returned `n` (errno `error` when negative).
enum class UpgradeOutcome {
  Pending, // interrupted: read again when it is readable again
  Ready,   // the new master serves: this one retires
  Failed,  // the new master exited (or failed) before it was ready: this one goes on
};
UpgradeOutcome ready_outcome(ssize_t n, int error);

// The new master being started, until it is ready or gone.
class UpgradeChild {
public:
  UpgradeChild() = default;
  ~UpgradeChild();
  UpgradeChild(const UpgradeChild&) = delete;
  UpgradeChild& operator=(const UpgradeChild&) = delete;

  // Forks the new master-to-be: a clean process (default dispositions, the signal pipe closed,
  // the mask restored) that calls exec(ready_fd) and _exit(127) if it returns. False when it
  // could not start (logged).
  bool start(SignalPipe& signals, const std::function<void(int ready_fd)>& exec);
  bool running() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  int pipe_fd() const { return fd_; } // the read end of its ready pipe; -1 when none runs
  // The ready pipe is readable. Once Ready or Failed, no upgrade runs any more (read pid()
  // before).
  UpgradeOutcome on_readable();

private:
  pid_t pid_ = -1;
  int fd_ = -1; // the read end of its ready pipe
};

// The new master's side: one byte to the old master once the first generation is ready, then
// the pipe is closed (fd becomes -1). Nothing when fd is -1.
void write_ready_byte(int& fd);

} // namespace process_manager
