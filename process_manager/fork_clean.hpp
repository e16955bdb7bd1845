#pragma once
// The one fork of the house: every signal blocked across fork() (no handler of the parent ever
// runs in the child), then, in the child, every disposition back to SIG_DFL before `child`
// runs. `child` gets the parent's signal mask and restores it (restore_signal_mask) when it is
// ready for signals: a worker after its crash handler is in, a program right before exec (or
// an empty mask, when the parent kept signals blocked for a signal pipe). `child` never
// returns: it execs or _exits (a return is _exit(127)). The child is dumpable again (a master
// hides itself, hide_from_own_user(); its workers must stay traceable for its stack taking).
#include <functional>
#include <signal.h>
#include <sys/types.h>

namespace process_manager {

// The child's pid, or -1 with errno from fork(). The parent's mask is restored either way.
pid_t fork_clean(const std::function<void(const sigset_t& parent_mask)>& child);

// A master not started as root shares its user with its workers (a container's one uid):
// PR_SET_DUMPABLE 0 keeps them out of its memory and its /proc files (environ, mem, fd), and
// from ptrace; root's are closed to them by their own user already. Its core dumps go too. A
// failure is logged at warn level.
void hide_from_own_user();

} // namespace process_manager
