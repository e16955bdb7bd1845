#pragma once
// fork() with the discipline a supervisor needs: signals blocked across the fork, a clean child
// (default dispositions, no master pipe, dies with the master), and a child that never returns
// into the master's stack.
#include "process_manager/signal_pipe.hpp"
#include "process_manager/worker_context.hpp"

#include <functional>
#include <span>
#include <string>

#include <sys/types.h>

namespace process_manager {

class Mold;

class Spawner {
public:
  Spawner(Scoreboard& scoreboard, SignalPipe& signals)
      : scoreboard_(scoreboard), signals_(signals) {}

  // Forks a worker for `slot` of `generation`. Parent: returns the child's pid, or -1 with errno
  // set when fork() failed. Child: closes `master_fds` (what only the master serves: a status
  // socket, the read end of the workers' output), runs `worker_main` and _exit()s with its
  // result. `log_channel`: the worker's end of its log handover (WorkerContext::log_channel).
  pid_t spawn(std::size_t slot, std::uint32_t generation,
              const std::function<int(const WorkerContext&)>& worker_main,
              std::span<const int> master_fds = {}, int log_channel = -1);

  // The same, the fork done by the generation's mold (mold.hpp). -1 with `why` when it failed.
  pid_t spawn_from(Mold& mold, std::size_t slot, std::uint32_t generation, int log_channel,
                   std::string& why);

  // The worker's side of either, in the child: never returns. `from_mold`: the mold set the
  // process up (WorkerContext::from_mold).
  [[noreturn]] void run_child(pid_t master, const sigset_t& mask, std::size_t slot,
                              std::uint32_t generation,
                              const std::function<int(const WorkerContext&)>& worker_main,
                              std::span<const int> master_fds, int log_channel,
                              bool from_mold = false);

  // In a child of the master: closes the signal pipe and `master_fds`.
  void close_master_fds(std::span<const int> master_fds);

private:
  WorkerSlot& prepare(std::size_t slot, std::uint32_t generation);

  Scoreboard& scoreboard_;
  SignalPipe& signals_;
};

} // namespace process_manager
