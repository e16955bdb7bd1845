#include "process_manager/spawner.hpp"

#include "process_manager/crash_report.hpp"
#include "process_manager/exit_codes.hpp"
#include "process_manager/fork_clean.hpp"
#include "process_manager/log.hpp"
#include "process_manager/mold.hpp"

#include <cerrno>
#include <cstring>
#include <exception>
#include <sys/prctl.h>
#include <unistd.h>

namespace process_manager {

pid_t Spawner::spawn(std::size_t slot, std::uint32_t generation,
                     const std::function<int(const WorkerContext&)>& worker_main,
                     std::span<const int> master_fds, int log_channel) {
  WorkerSlot& s = prepare(slot, generation);
  pid_t master = getpid();
  pid_t pid = fork_clean([&](const sigset_t& mask) {
    run_child(master, mask, slot, generation, worker_main, master_fds, log_channel);
  });
  if (pid == -1) {
    const int fork_errno = errno;
    s.state = WorkerState::Free;
    errno = fork_errno;
    return -1;
  }
  s.pid = pid;
  return pid;
}

// The slot is marked Starting before the fork: were the parent to write it after, it could
// overwrite the child's first Idle and the worker would never look ready.
WorkerSlot& Spawner::prepare(std::size_t slot, std::uint32_t generation) {
  scoreboard_.prepare(slot, 1); // the worker says how many threads it runs
  WorkerSlot& s = scoreboard_.slot(slot);
  s.generation = generation;
  s.state = WorkerState::Starting;
  return s;
}

pid_t Spawner::spawn_from(Mold& mold, std::size_t slot, std::uint32_t generation, int log_channel,
                          std::string& why) {
  WorkerSlot& s = prepare(slot, generation);
  const pid_t pid = mold.fork_worker(slot, log_channel, why);
  if (pid == -1) {
    s.state = WorkerState::Free;
    return -1;
  }
  // The worker may have written its own pid already: the same value.
  s.pid = pid;
  return pid;
}

void Spawner::close_master_fds(std::span<const int> master_fds) {
  signals_.close_in_child();
  // Close-on-exec does not help a worker that is only forked: a handler must not be able to
  // read the master's sockets.
  for (int fd : master_fds)
    ::close(fd);
}

void Spawner::run_child(pid_t master, const sigset_t& mask, std::size_t slot,
                        std::uint32_t generation,
                        const std::function<int(const WorkerContext&)>& worker_main,
                        std::span<const int> master_fds, int log_channel, bool from_mold) {
  close_master_fds(master_fds);
  // Die with the master. The master may already be gone by the time prctl() runs, in which case
  // the death signal will never come: check that our parent is still the master.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) == -1 || getppid() != master) _exit(exit_code::kWorkerError);
  WorkerSlot& s = scoreboard_.slot(slot);
  s.pid = getpid();
  // The master acts on what the slots say (stacks, kills): a worker writes its own region only.
  if (!scoreboard_.protect_others(slot)) _exit(exit_code::kWorkerError);
  // Before the entry point: a crash in a handler's start hook is reported too.
  install_crash_handler(s, master);
  restore_signal_mask(mask);

  int code = exit_code::kWorkerError;
  try {
    code = worker_main(WorkerContext{slot, s, generation, scoreboard_, log_channel, from_mold});
  } catch (const std::exception& e) {
    PM_LOG(LogLevel::Error, std::string("worker exception: ") + e.what());
  } catch (...) {
    PM_LOG(LogLevel::Error, "worker exception of unknown type");
  }
  // _exit, not exit: no atexit handler or destructor of the master's objects runs in a worker.
  _exit(code);
}

int boot_failure(const WorkerContext& context, const std::string& why) {
  Scoreboard::set_request(context.slot.request(0), kBootFailureMethod,
                          std::strlen(kBootFailureMethod), why.data(), why.size());
  return exit_code::kWorkerBootFailure;
}

} // namespace process_manager
