#pragma once
// What a worker process sees of its supervisor: its slot in the scoreboard, its generation, and
// the one call to report that it cannot boot. The worker's side includes this, never master.hpp.
#include "process_manager/scoreboard.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

namespace process_manager {

// Handed to a worker's entry point in the child process.
struct WorkerContext {
  std::size_t slot_index;
  WorkerSlot& slot;
  std::uint32_t generation;
  Scoreboard& scoreboard;
  // Where the master hands the worker its logs after a rotation (log_handover.hpp); -1: none,
  // the worker reopens them itself.
  int log_channel = -1;
  // Forked by its generation's mold (mold.hpp), which set the process up already (its user,
  // environment, the application loaded and warmed): the worker goes on from there.
  bool from_mold = false;
};

// A worker's entry point returns this when it cannot boot (a handler's start hook threw, the
// privileges could not be dropped, exec failed): `why` goes to the master through the slot, and
// the master writes the one line that says what failed and that it stops. Returns
// exit_code::kWorkerBootFailure.
int boot_failure(const WorkerContext& context, const std::string& why);

} // namespace process_manager
