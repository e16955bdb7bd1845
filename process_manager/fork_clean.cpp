#include "process_manager/fork_clean.hpp"

#include "process_manager/signal_pipe.hpp"

#include <cerrno>
#include <unistd.h>

namespace process_manager {

pid_t fork_clean(const std::function<void(const sigset_t& parent_mask)>& child) {
  const sigset_t mask = block_all_signals();
  const pid_t pid = ::fork();
  if (pid == 0) {
    reset_signal_dispositions();
    child(mask);
    _exit(127);
  }
  const int fork_errno = errno;
  restore_signal_mask(mask);
  errno = fork_errno;
  return pid;
}

} // namespace process_manager
