#pragma once
// Spawn mode (`fcgi-host --exec PROGRAM [ARGS...]`): each worker execs an existing FastCGI program
// with spawn-fcgi's contract, and the master supervises, respawns, reloads and stops it like its
// own workers.
//  - fd 0 is the listen socket, blocking (libfcgi programs block in accept());
//  - fd 1 and 2 go to the host's log; every other fd is closed;
//  - --user/--group, --clear-env and --env apply as for built-in workers;
//  - --sandbox and --private-tmp apply to the program: set before the exec, they hold for it
//    (Landlock with the program and /usr readable and executable, no_new_privs, capabilities
//    dropped, the seccomp filter without its exec rule). --script-root DIR is in its read list.
//  - --script-root and --script-extensions put the host in front of the program
//    (script_relay.hpp): the worker relays each request to its program after checking the
//    script, and answers 404 itself for a script outside DIR or of another suffix.
// The program cannot write the scoreboard: it counts as ready once it has lived
// kExecBootWindow (the master then marks its slot idle; a death before that, while its
// generation was never ready, is a boot failure: `--exec /bin/false` stops the master at start
// instead of looping), and --request-timeout and the status page see it as idle. Signals
// (PoolSettings): TERM to retire or stop it (libfcgi finishes the current request, then exits), no
// USR1 (libfcgi takes it as a stop).
#include "fcgi_host/config/limits.hpp"
#include "fcgi_host/runners/script_gate.hpp"
#include "fcgi_host/sandbox/sandbox_settings.hpp"
#include "fcgi_host/worker/process_setup.hpp"
#include "process_manager/worker_context.hpp"

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
  SandboxSettings sandbox;
  ScriptRule script;     // --script-root, --script-extensions: the relay checks each request
  RequestLimits request; // --max-body, --max-params, ...: the relay frames requests with them
};

// The worker's entry point; returns only when exec failed (a boot failure: the master stops
// with one clear line instead of respawning a program that cannot start).
int run_exec_worker(const process_manager::WorkerContext& context, const ExecSettings& settings);

// The program's start once the worker's privileges are dropped: `listen_fd` as its fd 0, the log
// as 1 and 2, the sandbox, the exec. Returns only when that failed (a boot failure).
int exec_program(const process_manager::WorkerContext& context, const ExecSettings& settings,
                 int listen_fd);

} // namespace fcgi_host
