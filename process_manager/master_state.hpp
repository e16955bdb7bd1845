#pragma once
// The master's lifecycle as data: states, which request may override which, and how each kind of
// worker stop escalates. Pure functions, unit-tested without processes (shape of FPM's fpm_pctl).
#include <chrono>

namespace process_manager {

enum class State {
  Running,      // serving; the pool is kept at its target
  Reloading,    // a new generation is starting; the old one still serves
  Stopping,     // graceful stop: workers finish in-flight requests
  FastStopping, // fast stop: workers exit now
  Stopped,      // every worker is gone: run() returns
};

const char* to_string(State s);

// May a request to enter `to` replace the current state `from`?
bool can_override(State from, State to);

// May the pool spawn workers in this state?
bool can_spawn(State s);

// Why the master stops a worker.
enum class StopReason {
  Graceful, // TERM/QUIT to the master
  Fast,     // INT to the master
  Retire,   // old generation after a reload, or one worker less (TTOU)
  Timeout,  // a request ran past request_timeout
  Abandon,  // a new generation that failed to become ready: still starting, so exit now
};

const char* to_string(StopReason r);

// The escalation of one stop: send `signal`, then SIGKILL after `kill_after` if the worker is
// still there. A `signal` of SIGKILL needs no second step.
struct Escalation {
  int signal;
  std::chrono::milliseconds kill_after;
};

inline constexpr std::chrono::milliseconds kFastStopGrace{1000};

Escalation escalation(StopReason r, std::chrono::milliseconds graceful_timeout);

} // namespace process_manager
