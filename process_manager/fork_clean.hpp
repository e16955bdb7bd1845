#pragma once
// The one fork of the house: every signal blocked across fork() (no handler of the parent ever
// runs in the child), then, in the child, every disposition back to SIG_DFL before `child`
// runs. `child` gets the parent's signal mask and restores it (restore_signal_mask) when it is
// ready for signals: a worker after its crash handler is in, a program right before exec (or
// an empty mask, when the parent kept signals blocked for a signal pipe). `child` never
// returns: it execs or _exits (a return is _exit(127)).
#include <functional>
#include <signal.h>
#include <sys/types.h>

namespace process_manager {

// The child's pid, or -1 with errno from fork(). The parent's mask is restored either way.
pid_t fork_clean(const std::function<void(const sigset_t& parent_mask)>& child);

} // namespace process_manager
