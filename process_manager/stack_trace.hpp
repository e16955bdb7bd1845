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
// thread of the process (eu-stack; gdb shows the thread it stops in), when it is one of `pid`'s
// (else the whole process: an id read from a worker's slot is checked); 0: every thread.
std::string capture_stack(pid_t pid, std::chrono::milliseconds budget, pid_t tid = 0);

} // namespace process_manager
