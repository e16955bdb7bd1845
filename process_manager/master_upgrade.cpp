#include "process_manager/master_impl.hpp"

#include "process_manager/log.hpp"

namespace process_manager {

// USR2: binary upgrade. A child of this master execs the binary again, keeping the listen
// socket; once its first generation is ready it writes one byte to our pipe (on_upgrade_pipe),
// and this master retires its workers and exits. Until then both serve the one socket.
void Master::Impl::on_usr2() {
  // During a canary rollout the old generation is the one known to be good: it goes on.
  if (rollout.active() && options.upgrade_exec && !upgrade.running())
    undo_rollout("rollout of generation " + std::to_string(rollout.generation) +
                 " undone: a binary upgrade (USR2) came during it");
  if (std::optional<std::string> why =
          why_not_upgrade(static_cast<bool>(options.upgrade_exec), upgrade.running(), state)) {
    PM_LOG(LogLevel::Warn, *why);
    return;
  }
  upgrade.start(signals, options.upgrade_exec);
}

void Master::Impl::on_upgrade_pipe() {
  std::string pid = std::to_string(upgrade.pid());
  UpgradeOutcome outcome = upgrade.on_readable();
  if (outcome == UpgradeOutcome::Pending) return;
  if (outcome == UpgradeOutcome::Failed) {
    PM_LOG(LogLevel::Error, "binary upgrade failed: new master " + pid +
                                " exited before it was ready; this master keeps serving");
    if (options.on_upgrade) options.on_upgrade(false);
    return;
  }
  PM_LOG(LogLevel::Notice,
         "binary upgrade: new master " + pid + " is ready; retiring this master's workers");
  handed_over = true;
  scoreboard.pool().successor_master.store(true, std::memory_order_release);
  // Still the main pid: systemd accepts the new one from us, and follows it from now on.
  notifier.notify("MAINPID=" + pid + "\nREADY=1");
  if (options.on_upgrade) options.on_upgrade(true);
  begin_stop(State::Stopping, StopReason::Retire);
}

} // namespace process_manager
