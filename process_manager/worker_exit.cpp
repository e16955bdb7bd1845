#include "process_manager/worker_exit.hpp"

#include <csignal>
#include <cstring>

namespace process_manager {

WorkerExit classify_exit(const ExitedChild& c, const ExitFacts& facts) {
  if (facts.boot_error) return WorkerExit::BootFailure;
  const bool clean = c.kind == ExitedChild::Kind::Exited && c.code == 0;
  const bool killed_from_outside = c.kind == ExitedChild::Kind::Signaled && c.signal == SIGKILL;
  if (!facts.ready && killed_from_outside && facts.generation_ready) return WorkerExit::Crash;
  if (!facts.ready && !(facts.ready_by_time && facts.generation_ready))
    return WorkerExit::BootFailure;
  return clean ? WorkerExit::Done : WorkerExit::Crash;
}

std::string describe_death(const ExitedChild& c) {
  if (c.kind == ExitedChild::Kind::Exited) return "exited with code " + std::to_string(c.code);
  const char* abbrev = sigabbrev_np(c.signal);
  return abbrev ? std::string("died of SIG") + abbrev
                : "died of signal " + std::to_string(c.signal);
}

} // namespace process_manager
