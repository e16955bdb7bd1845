#pragma once
// Spawn mode (`fcgi-host --exec PROGRAM [ARGS...]`): each worker execs an existing FastCGI program
// with spawn-fcgi's contract, and the master supervises, respawns, reloads and stops it like its
// own workers.
//  - fd 0 is the listen socket, blocking (libfcgi programs block in accept());
//  - fd 1 and 2 go to the host's log; every other fd is closed;
//  - --user/--group, --clear-env and --env apply as for built-in workers.
// The program cannot write the scoreboard: it counts as ready once it has lived
// kExecBootWindow (the master then marks its slot idle; a death before that, while its
// generation was never ready, is a boot failure: `--exec /bin/false` stops the master at start
// instead of looping), and --request-timeout and the status page see it as idle. Signals
// (PoolSettings): TERM to retire or stop it (libfcgi finishes the current request, then exits), no
// USR1 (libfcgi takes it as a stop).
#include "fcgi_host/worker/process_setup.hpp"
#include "process_manager/master.hpp"

#include <chrono>
#include <string>
#include <vector>

namespace fcgi_host {

// How long an exec'd program must live to count as ready (PoolSettings::boot_window): a program
// that cannot start (bad arguments, a missing library or config) is gone well within it.
inline constexpr std::chrono::milliseconds kExecBootWindow{1000};

struct ExecSettings {
  int listen_fd = -1;
  std::vector<std::string> argv; // program (looked up in PATH) and its arguments
  Credentials credentials;
  bool clear_env = false;
  std::vector<std::string> env;
};

// The worker's entry point; returns only when exec failed (a boot failure: the master stops
// with one clear line instead of respawning a program that cannot start).
int run_exec_worker(const process_manager::WorkerContext& context, const ExecSettings& settings);

} // namespace fcgi_host
