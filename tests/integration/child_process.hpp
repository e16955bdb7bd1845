#pragma once
// The harness's own child processes (the host under test, nginx): started in a process group of
// their own, so that a test that fails half-way still leaves nothing running.
#include "support/wait.hpp"

#include <optional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace it::detail {

using Millis = std::chrono::milliseconds;

// fork + exec with its own process group, stdin from /dev/null, stdout and stderr to `log`.
pid_t spawn(const std::vector<std::string>& argv, const std::string& log, const std::string& cwd);

// Waits (bounded) for our child `pid` to exit; returns its status as code or 128 + signal.
std::optional<int> reap(pid_t pid, Millis timeout);

// SIGKILL to the child's whole group, then reaps it.
void kill_group_and_reap(pid_t pid);

} // namespace it::detail
