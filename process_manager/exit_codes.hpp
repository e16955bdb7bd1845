#pragma once
// The exit codes of workers and of the master, and what the master does with each worker code.
// Published in the README; keep the two in step.
namespace process_manager::exit_code {

// Worker exit codes.
inline constexpr int kWorkerDone = 0;  // clean exit (graceful stop, recycling): respawn if wanted
inline constexpr int kWorkerError = 1; // unexpected error in the worker: respawn with backoff
inline constexpr int kWorkerBootFailure =
    3; // could not start (plugin load, on_worker_start threw):
       // the master stops instead of respawning in a loop
// Any death before the worker was ready (another code, a signal) is a boot failure too; after
// it, a worker killed by a signal is a crash: respawned with backoff, counted by the crash-loop
// breaker (worker_exit.hpp).

// Master (process) exit codes.
inline constexpr int kOk = 0;             // stopped on request
inline constexpr int kFailure = 1;        // runtime failure (workers failed to boot, crash loop)
inline constexpr int kUsage = 2;          // bad option, bad config file
inline constexpr int kStartupFailure = 3; // listen socket, pidfile, privileges

} // namespace process_manager::exit_code
