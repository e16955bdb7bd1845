#pragma once
// What the scheduler says of one thread (/proc/PID/task/TID/stat and schedstat): whether it is
// runnable, and how long it has run and waited for a CPU. The master asks it of a worker whose
// request ran past --handoff-after, to tell a slow handler (asleep on something, or computing)
// from a worker that was only kept off the CPU (more runnable threads than CPUs): moving the
// latter's connections would cost, and they would wait for a CPU in the next worker too.
#include <cstdint>
#include <string_view>
#include <sys/types.h>

namespace process_manager {

struct ThreadSched {
  bool known = false;        // both files were read
  bool runnable = false;     // state R: on a CPU or waiting for one
  std::uint64_t run_ns = 0;  // on a CPU, in all
  std::uint64_t wait_ns = 0; // runnable, waiting for a CPU, in all
};

ThreadSched read_thread_sched(pid_t pid, pid_t tid);

// The two files' texts (pure: tested without a process).
ThreadSched parse_thread_sched(std::string_view stat, std::string_view schedstat);

} // namespace process_manager
