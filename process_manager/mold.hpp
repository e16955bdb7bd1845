#pragma once
// A mold (--mold on): a process the master forks for one generation, which boots once (in
// fcgi-host: drops to the workers' user, loads the application, runs its mold hook) and then
// forks that generation's workers when the master asks, so that they share its warmed pages
// copy-on-write and a new worker costs a fork, not a boot. Each worker is still the master's
// child: the mold forks twice, and the grandchild waits until its middle parent is gone and it
// is reparented to the master (the master is a child subreaper: master.cpp start()) before it
// sets its death signal and goes on. So the master reaps, signals, times out and takes stacks of
// it as of a worker it forked itself. The master learns the worker's pid from the mold over a
// socket pair and nothing else; the mold never writes the scoreboard (the master prepares the
// slot, the worker fills it). The mold serves no request and runs no thread.
#include "process_manager/worker_context.hpp"

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <sys/types.h>

namespace process_manager {

class Spawner;

// What the mold's boot says: "" when it is ready, else why (one line). `keep_fd`: a descriptor
// the master keeps for the generation's later molds (a mold that replaces a dead one boots from
// it: fcgi-host's sealed copy of the plugin, so the code is the generation's, not the file's
// now); -1 for none. The master only holds it.
struct MoldBoot {
  std::string error;
  int keep_fd = -1;
};

// What a generation with a mold runs. `boot` runs in the mold after the fork, once, with all
// signals blocked; `kept_fd` is what an earlier mold of the generation kept, or -1.
struct MoldPlan {
  std::function<MoldBoot(int kept_fd)> boot;
  // The descriptor kept for the generation (MoldBoot::keep_fd), shared by the copies of the
  // Generation (a reload undone runs the same configuration, and code, again).
  struct Kept {
    int fd = -1;
    ~Kept();
  };
  std::shared_ptr<Kept> kept = std::make_shared<Kept>();
};

// The mold's name in ps and /proc/PID/comm (its workers take back the master's name).
inline constexpr const char* kMoldProcessName = "fcgi-host mold";

// The longest a mold's boot may take (loading the application and its mold hook); the master's
// loop goes on meanwhile (Mold::read_boot).
inline constexpr std::chrono::milliseconds kMoldBootTimeout{60'000};
// The longest the master waits for the mold to say which pid it forked (a fork: milliseconds).
inline constexpr std::chrono::milliseconds kMoldForkTimeout{5'000};

// The master's side of one mold.
class Mold {
public:
  ~Mold(); // the mold is killed (its workers are not: they are the master's children)
  Mold(const Mold&) = delete;
  Mold& operator=(const Mold&) = delete;

  // Forks the mold of `generation`, which boots while the master's loop goes on (read_boot()).
  // In the mold: closes `close_fds` (what only the master holds), dies with the master, runs
  // plan.boot, says how it went, then forks a worker running `worker_main` (through
  // spawner.run_child, as the master would) for each request. Null with `why` when the fork
  // failed.
  static std::unique_ptr<Mold> start(std::uint32_t generation, const MoldPlan& plan,
                                     Spawner& spawner,
                                     const std::function<int(const WorkerContext&)>& worker_main,
                                     std::span<const int> close_fds, std::string& why);

  // The boot's outcome, read without waiting (when its channel is readable, or it exited):
  // Ready (the kept descriptor, if any, goes to the plan's Kept), Failed with `why`, or Pending
  // (Failed once kMoldBootTimeout has passed).
  enum class Boot { Pending, Ready, Failed };
  Boot read_boot(std::string& why);
  bool booted() const { return booted_; }

  // Asks the booted mold for a worker in `slot` (already prepared by the master), handing it
  // `log_channel` (-1: none). Its pid, or -1 with `why`.
  pid_t fork_worker(std::size_t slot, int log_channel, std::string& why);

  pid_t pid() const { return pid_; }
  std::uint32_t generation() const { return generation_; }
  std::uint64_t started_at_ns() const { return started_at_ns_; }
  int channel() const { return channel_; }
  // The master reaped it: its pid is no longer its to signal.
  void forget_pid() { pid_ = 0; }

private:
  Mold(pid_t pid, int channel, std::uint32_t generation, std::shared_ptr<MoldPlan::Kept> kept);
  pid_t pid_;
  int channel_;
  std::uint32_t generation_;
  std::uint64_t started_at_ns_;
  std::shared_ptr<MoldPlan::Kept> kept_;
  bool booted_ = false;
};

} // namespace process_manager
