#pragma once
// Reload by generations (HUP, --reload-grace): which configuration the pool runs, which one still
// serves while the new one starts, and which one comes back when a reload fails or is undone.
// Pure bookkeeping fed with monotonic times, unit-tested without processes; the master starts
// and stops the workers (master_reload.cpp: on_hup(), advance_reload(), abandon_reload(),
// go_back()).
//
// A reload: begin() makes the new generation current beside the previous one, which serves
// until the new one is ready (complete()) or has failed (abandon(): the previous one is current
// again). With a reload grace, complete() keeps the previous configuration, and the new
// generation's crashes are counted (reload_grace.hpp): the kCrashes-th within the grace undoes
// the reload (go_back(): the kept configuration starts again, as a new generation).
#include "process_manager/mold.hpp"
#include "process_manager/pool_settings.hpp"
#include "process_manager/reload_grace.hpp"
#include "process_manager/worker_context.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

namespace process_manager {

// What one generation runs. On HUP the master asks for a new one; the old one drains.
struct Generation {
  PoolSettings pool;
  // Runs in the child; its return value is the child's exit code (see exit_codes.hpp). It
  // must catch everything: the child calls _exit() with the result and never unwinds into
  // the master's stack.
  std::function<int(const WorkerContext&)> worker_main;
  // What the master adds to the line of a worker of this generation that failed to boot, given
  // the worker's why (the sandbox's hint, fcgi_host/sandbox/sandbox_hint.hpp). Unset: nothing.
  std::function<std::string(const std::string& why)> explain_boot_failure;
  // --mold on: the generation's workers are forked by a mold that boots once (mold.hpp).
  std::optional<MoldPlan> mold;
};

class Generations {
public:
  explicit Generations(Generation first);

  // The generation the pool is kept at, and its number (the first is 1).
  Generation& current() { return current_; }
  const Generation& current() const { return current_; }
  std::uint32_t current_number() const { return current_number_; }
  // During a reload: the number of the generation that still serves.
  std::uint32_t previous_number() const { return previous_number_; }
  // The newest generation that was ready (all its workers) once.
  std::uint32_t ready_number() const { return ready_number_; }
  void mark_current_ready() { ready_number_ = std::max(ready_number_, current_number_); }

  // A reload starts: `next` becomes current (numbered after every one before it); the current
  // one is kept as the previous until complete() or abandon(). It has until its graceful
  // timeout to be ready.
  void begin(Generation next, std::uint64_t now_ns);
  bool deadline_passed(std::uint64_t now_ns) const { return now_ns >= deadline_ns_; }
  // The new generation is ready. With a reload grace, the previous configuration is kept until
  // the grace is over.
  void complete(std::uint64_t now_ns);
  // The new generation failed to become ready: the previous one is current again.
  void abandon();

  // A HUP during a reload waits for its end.
  void queue_reload() { reload_queued_ = true; }
  bool take_queued_reload() { return std::exchange(reload_queued_, false); }
  void forget_queued_reload() { reload_queued_ = false; }

  // --reload-grace. A worker of `gen` crashed at `now_ns`: true when that undoes the last reload.
  bool crash_undoes_reload(std::uint32_t gen, std::uint64_t now_ns);
  // Whether the crashes of `gen` are counted (a boot failure of its replacement undoes it too).
  bool in_grace(std::uint32_t gen, std::uint64_t now_ns) const;
  // The grace of the last reload is over: its previous configuration is dropped.
  void end_grace_if_over(std::uint64_t now_ns);
  // The last reload is undone: the configuration before it begins again as a new generation.
  // Returns the numbers of the generation undone and of the one whose configuration comes back.
  struct Undo {
    std::uint32_t undone = 0;
    std::uint32_t restored = 0;
  };
  Undo go_back(std::uint64_t now_ns);

private:
  Generation current_;
  std::uint32_t current_number_ = 1;
  std::optional<Generation> previous_; // set while a reload runs
  std::uint32_t previous_number_ = 0;
  std::uint32_t last_number_ = 1;
  std::uint32_t ready_number_ = 0;
  std::uint64_t deadline_ns_ = 0;
  bool reload_queued_ = false;
  std::optional<Generation> fallback_; // the configuration before the last reload, in its grace
  std::uint32_t fallback_number_ = 0;
  ReloadGrace grace_;
};

} // namespace process_manager
