#pragma once
// The published signal table (README and --help carry the same table; keep them in step).
//
//  signal | master                                         | worker
//  -------+------------------------------------------------+-------------------------------------
//  TERM   | graceful stop: SIGTERM to every worker, SIGKILL | graceful stop: stop accepting, finish
//         | after graceful_timeout, exit 0                  | in-flight and queued requests, exit 0
//  QUIT   | graceful stop (same as TERM)                    | stop accepting now, finish in-flight
//         |                                                 | requests, exit 0 (old generation on
//         |                                                 | reload, one worker less on TTOU)
//  INT    | fast stop: SIGINT to every worker, SIGKILL      | exit now
//         | after 1 s, exit 0                               |
//  HUP    | graceful reload by generations                  | -
//  USR1   | reopen logs, then USR1 to every worker          | reopen logs
//  USR2   | binary upgrade: re-exec the binary (same path   | -
//         | and argv) with the listen socket; once the new  |
//         | master's workers are ready, retire ours, exit 0 |
//  TTIN   | one worker more in the current generation       | -
//  TTOU   | one worker less (never below 1)                 | -
//  CHLD   | reap                                            | -
//  RTMIN+1| -                                              | (sent by the master) move kept
//         |                                                 | connections to a free worker
//
// TERM is graceful, as in gunicorn and unlike nginx, because systemd and container runtimes send
// TERM to stop a service and nothing may be lost then.
#include <csignal>

namespace process_manager::signals {

// What the master handles.
inline constexpr int kMasterSignals[] = {SIGTERM, SIGQUIT, SIGINT,  SIGHUP, SIGUSR1,
                                         SIGUSR2, SIGTTIN, SIGTTOU, SIGCHLD};

// What the master sends to a worker.
inline constexpr int kWorkerGracefulStop = SIGTERM; // finish in-flight, drain the queue, exit 0
inline constexpr int kWorkerRetire = SIGQUIT;       // stop accepting now, finish in-flight, exit 0
inline constexpr int kWorkerFastStop = SIGINT;      // exit now
inline constexpr int kWorkerReopenLogs = SIGUSR1;
// A worker whose request has run longer than PoolSettings::nudge_after while it holds other
// connections: it may pass them to a free worker. Never interrupts a handler: the worker
// keeps it blocked and waits for it in a thread of its own. (Not a constant: SIGRTMIN is not.)
inline int nudge_signal() {
  return SIGRTMIN + 1;
}

} // namespace process_manager::signals
