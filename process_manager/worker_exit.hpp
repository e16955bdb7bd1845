#pragma once
// What a worker's exit means to the master, as pure logic over the wait status and what the
// master knew of the worker, so that it is unit-tested without processes.
//
// "Ready" is when a worker can serve: its slot left Starting. The host's own workers write
// Idle there once the handler's on_worker_start returned and the worker loop runs; a program
// run with --exec cannot write its slot, so the master writes Idle for it once it has lived
// the pool's boot window (PoolSettings::boot_window).
//
// - Boot failure: any death before ready, whatever its form (an exit code, 0 included, a
//   signal: abort(), exit(1), a SIGKILL while booting), and the host's own "could not boot"
//   (exit code 3 with a reason in the slot). Respawning would only fail again: at a fresh start
//   the master stops; at a reload the old generation keeps serving.
//   SIGKILL is the exception once the generation was ready: it comes from outside (the OOM
//   killer, an operator's kill -9), not from code that cannot boot, so a replacement worker
//   killed while it boots is respawned like a crash (a whole master stopped by one OOM kill of a
//   booting replacement would lose every request the others were serving).
//   For an --exec program, whose readiness is only a guess by time, a death inside the boot
//   window counts as a boot failure only while its generation has never been ready: a program
//   that crashes on an early request later on is respawned, with backoff.
// - Done: exit code 0 after ready (recycling): replaced at once.
// - Crash: anything else after ready: respawned with backoff (CrashPolicy), breaker included.
#include "process_manager/reaper.hpp"

#include <string>

namespace process_manager {

enum class WorkerExit { Done, BootFailure, Crash };

struct ExitFacts {
  bool ready = false;            // the slot had left Starting
  bool boot_error = false;       // the worker left "could not boot" and why in its slot
  bool ready_by_time = false;    // --exec: ready means alive for the boot window
  bool generation_ready = false; // its generation was ready once (all its workers)
};

WorkerExit classify_exit(const ExitedChild& c, const ExitFacts& facts);

// "died of SIGABRT", "died of signal 40", "exited with code 1".
std::string describe_death(const ExitedChild& c);

} // namespace process_manager
