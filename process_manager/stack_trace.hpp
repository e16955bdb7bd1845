#pragma once
// A stack trace of another process, taken with an external debugger (eu-stack, else gdb), for the
// log line of a worker about to be killed for a request timeout. Bounded in time: the master's
// loop waits for it, so a slow or wedged debugger is killed at the deadline.
#include <chrono>
#include <string>
#include <sys/types.h>

namespace process_manager {

// The debugger's frame lines ("#0 ...", each followed by its source file:line where debug info
// is installed, and inlined frames), one per line; or one line saying why there are none ("no
// debugger installed (eu-stack or gdb)", "debugger timed out after 1.0 s"). `tid`: only that
// thread of the process (eu-stack; gdb shows the thread it stops in); 0: every thread.
// `pid` must be a process the caller forked (never a pid read from the scoreboard); a `tid` that
// is not one of its threads (is_thread_of) is ignored: every thread's stack instead.
std::string capture_stack(pid_t pid, std::chrono::milliseconds budget, pid_t tid = 0);

// Whether `tid` is a thread of process `pid` (/proc/PID/task/TID).
bool is_thread_of(pid_t pid, pid_t tid);

} // namespace process_manager
