#pragma once
// The master: preforks workers, supervises them, reloads by generations. It never touches a
// client connection and knows nothing of FastCGI: the worker's entry point is a callable.
#include "process_manager/scoreboard.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace process_manager {

struct PoolSettings {
  int workers = 1;
  // TERM/QUIT and reload: how long in-flight requests may take before SIGKILL.
  std::chrono::milliseconds graceful_timeout{30'000};
  // 0 = off. A worker whose slot shows one request running longer is killed (SIGKILL) and
  // replaced.
  std::chrono::milliseconds request_timeout{0};
};

// Handed to a worker's entry point in the child process.
struct WorkerContext {
  std::size_t slot_index;
  WorkerSlot& slot;
  std::uint32_t generation;
  Scoreboard& scoreboard;
};

// What one generation runs. On HUP the master asks for a new one; the old one drains.
struct Generation {
  PoolSettings pool;
  // Runs in the child; its return value is the child's exit code (see exit_codes.hpp). It
  // must catch everything: the child calls _exit() with the result and never unwinds into
  // the master's stack.
  std::function<int(const WorkerContext&)> worker_main;
};

struct MasterOptions {
  // Number of scoreboard slots: the most workers of all generations alive at once.
  std::size_t scoreboard_capacity = 1024;
  // HUP: parse the configuration again. Returns nullopt when it is bad (the callee logs why);
  // the master then keeps running the current generation.
  std::function<std::optional<Generation>()> reload;
  // USR1: reopen log files (the master also signals workers to do the same).
  std::function<void()> reopen_logs;
  // Extra fds the master loop waits on (a status socket the master serves itself), and what to
  // do when one is readable. Called from the loop, never from a signal handler.
  std::vector<int> watch_fds;
  std::function<void(int fd)> on_readable;
};

class Master {
public:
  Master(Generation first, MasterOptions options);
  ~Master();
  Master(const Master&) = delete;
  Master& operator=(const Master&) = delete;

  // Runs until stopped. Returns the process exit code (exit_codes.hpp).
  int run();

  Scoreboard& scoreboard();

private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

} // namespace process_manager
