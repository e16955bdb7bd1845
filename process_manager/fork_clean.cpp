#include "process_manager/fork_clean.hpp"

#include "process_manager/log.hpp"
#include "process_manager/signal_pipe.hpp"

#include <cerrno>
#include <cstring>
#include <sys/prctl.h>
#include <unistd.h>

namespace process_manager {

pid_t fork_clean(const std::function<void(const sigset_t& parent_mask)>& child) {
  const sigset_t mask = block_all_signals();
  const pid_t pid = ::fork();
  if (pid == 0) {
    reset_signal_dispositions();
    ::prctl(PR_SET_DUMPABLE, 1); // a worker of a hidden master: its stacks are still taken
    child(mask);
    _exit(127);
  }
  const int fork_errno = errno;
  restore_signal_mask(mask);
  errno = fork_errno;
  return pid;
}

void hide_from_own_user() {
  if (::geteuid() != 0 && ::prctl(PR_SET_DUMPABLE, 0) != 0)
    PM_LOG(LogLevel::Warn, std::string("prctl(PR_SET_DUMPABLE, 0) failed: ") +
                               std::strerror(errno) +
                               "; workers of this user can read the master's memory");
}

} // namespace process_manager
