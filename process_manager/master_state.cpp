#include "process_manager/master_state.hpp"

#include "process_manager/signals.hpp"

namespace process_manager {

const char* to_string(State s) {
  switch (s) {
  case State::Running:
    return "running";
  case State::Reloading:
    return "reloading";
  case State::Stopping:
    return "stopping";
  case State::FastStopping:
    return "fast-stopping";
  case State::Stopped:
    return "stopped";
  }
  return "?";
}

bool can_override(State from, State to) {
  switch (to) {
  case State::Running:
    return from == State::Reloading; // a reload completed or was abandoned
  case State::Reloading:
    return from == State::Running; // a HUP during a reload is queued, not started
  case State::Stopping:
    return from == State::Running || from == State::Reloading; // a second TERM adds nothing
  case State::FastStopping:
    return from != State::FastStopping && from != State::Stopped; // INT escalates a graceful stop
  case State::Stopped:
    return from == State::Stopping || from == State::FastStopping; // once every worker is gone
  }
  return false;
}

bool can_spawn(State s) {
  return s == State::Running || s == State::Reloading;
}

const char* to_string(StopReason r) {
  switch (r) {
  case StopReason::Graceful:
    return "graceful stop";
  case StopReason::Fast:
    return "fast stop";
  case StopReason::Retire:
    return "retire";
  case StopReason::Timeout:
    return "request timeout";
  case StopReason::Abandon:
    return "abandoned generation";
  }
  return "?";
}

Escalation escalation(StopReason r, std::chrono::milliseconds graceful_timeout) {
  switch (r) {
  case StopReason::Graceful:
    return {signals::kWorkerGracefulStop, graceful_timeout};
  case StopReason::Retire:
    return {signals::kWorkerRetire, graceful_timeout};
  case StopReason::Fast:
  case StopReason::Abandon:
    return {signals::kWorkerFastStop, kFastStopGrace};
  case StopReason::Timeout:
    return {SIGKILL, std::chrono::milliseconds{0}};
  }
  return {SIGKILL, std::chrono::milliseconds{0}};
}

} // namespace process_manager
