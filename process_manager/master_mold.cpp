// The generations' molds (--mold on, mold.hpp): the current generation's mold is started when a
// worker is wanted and none runs (at start, after a reload, after it died and its backoff
// passed), and boots while the loop goes on (its workers are spawned once it is ready); a mold
// that cannot boot fails the start or the reload, as a worker's boot failure does; a mold that
// dies leaves its workers serving and is started again under the crash policy; a mold leaves
// with its generation.
#include "process_manager/master_impl.hpp"

#include "process_manager/clock.hpp"
#include "process_manager/log.hpp"

#include <algorithm>

namespace process_manager {

namespace {
std::string mold_name(const Mold& m) {
  return "mold " + std::to_string(m.pid()) + " (gen " + std::to_string(m.generation()) + ")";
}
} // namespace

// The current generation's mold, for the status page (PoolCounters).
void Master::Impl::publish_mold() {
  PoolCounters& p = scoreboard.pool();
  const Mold* shown = nullptr;
  for (const auto& m : molds)
    if (m->generation() == current_gen()) shown = m.get();
  p.mold_generation.store(shown ? shown->generation() : 0, std::memory_order_relaxed);
  p.mold_start_ns.store(shown ? shown->started_at_ns() : 0, std::memory_order_relaxed);
  p.mold_pid.store(shown ? shown->pid() : 0, std::memory_order_relaxed);
}

// What no child of the master may keep: its own sockets and pipes, every log channel's master
// end, every mold's channel, every generation's kept copy of its plugin.
std::vector<int> Master::Impl::master_only_fds() const {
  std::vector<int> fds = options.watch_fds;
  fds.insert(fds.end(), options.private_fds.begin(), options.private_fds.end());
  if (upgrade.pipe_fd() >= 0) fds.push_back(upgrade.pipe_fd());
  for (const Child& other : table.all())
    if (other.log_handover.valid()) fds.push_back(other.log_handover.master_fd());
  for (const auto& m : molds)
    fds.push_back(m->channel());
  for (const auto& copy : mold_copies)
    if (auto kept = copy.lock(); kept && kept->fd >= 0) fds.push_back(kept->fd);
  return fds;
}

Mold* Master::Impl::keep_mold() {
  if (!current().mold) return nullptr;
  for (const auto& m : molds) // a booting one: the workers wait for it
    if (m->generation() == current_gen()) return m->booted() ? m.get() : nullptr;
  if (boot_failed || !can_spawn(state) || monotonic_ns() < mold_restart_at_ns) return nullptr;
  std::string why;
  const auto& kept = current().mold->kept;
  std::erase_if(mold_copies, [](const std::weak_ptr<MoldPlan::Kept>& k) { return k.expired(); });
  if (std::none_of(mold_copies.begin(), mold_copies.end(),
                   [&kept](const std::weak_ptr<MoldPlan::Kept>& k) { return k.lock() == kept; }))
    mold_copies.push_back(kept);
  std::vector<int> close_fds = master_only_fds();
  std::erase(close_fds, kept->fd); // its own generation's copy is what it boots from
  std::unique_ptr<Mold> mold =
      Mold::start(current_gen(), *current().mold, spawner, current().worker_main, close_fds, why);
  if (!mold) {
    on_mold_boot_failure(why);
    return nullptr;
  }
  PM_LOG(LogLevel::Debug, mold_name(*mold) + " started");
  molds.push_back(std::move(mold));
  publish_mold();
  return nullptr; // check_mold_boots() says when it is ready
}

// A booting mold said how its boot went, or its time is up. A failure ends that mold; for the
// current generation it is a boot failure (on_mold_boot_failure), for another nothing more.
void Master::Impl::check_mold_boots() {
  for (auto it = molds.begin(); it != molds.end(); ++it) {
    if ((*it)->booted()) continue;
    std::string why;
    const Mold::Boot boot = (*it)->read_boot(why);
    if (boot == Mold::Boot::Pending) continue;
    if (boot == Mold::Boot::Ready) {
      PM_LOG(LogLevel::Info, mold_name(**it) + " ready");
      continue;
    }
    const bool current_one = (*it)->generation() == current_gen();
    molds_leaving.push_back((*it)->pid());
    molds.erase(it); // killed, if it has not exited yet
    publish_mold();
    if (current_one) on_mold_boot_failure(why);
    return; // the state may have changed: the others are looked at on the next turn
  }
}

bool Master::Impl::mold_can_fork() const {
  return !current().mold ||
         std::any_of(molds.begin(), molds.end(), [this](const std::unique_ptr<Mold>& m) {
           return m->booted() && m->generation() == current_gen();
         });
}

bool Master::Impl::is_booting_mold(int fd) const {
  return std::any_of(molds.begin(), molds.end(), [fd](const std::unique_ptr<Mold>& m) {
    return !m->booted() && m->channel() == fd;
  });
}

void Master::Impl::on_mold_boot_failure(const std::string& why) {
  std::string what =
      "the mold of generation " + std::to_string(current_gen()) + " could not boot: " + why;
  if (current().explain_boot_failure) what += current().explain_boot_failure(why);
  if (!can_spawn(state)) { // a stop began meanwhile: nothing depends on it any more
    PM_LOG(LogLevel::Notice, what);
  } else if (state == State::Reloading) {           // the previous generation serves on (an idle
    abandon_reload(what);                           // ondemand pool's too, with no worker now)
  } else if (current_gen() > gens.ready_number()) { // the start: respawning would fail again
    PM_LOG(LogLevel::Error,
           what + "; stopping, the master exits with code " + std::to_string(exit_code::kFailure));
    boot_failed = true;
    exit_code = exit_code::kFailure;
    begin_stop(State::Stopping, StopReason::Graceful);
  } else { // its workers serve on; the next try waits for the crash policy
    const std::uint64_t now = monotonic_ns();
    CrashPolicy::Decision d = crashes.on_crash(mold_slot(), 0, now);
    mold_restart_at_ns = d.respawn_at_ns;
    log_crash(LogLevel::Error, what + "; its workers keep serving", d);
  }
}

bool Master::Impl::on_mold_exit(const ExitedChild& c) {
  if (auto left = std::find(molds_leaving.begin(), molds_leaving.end(), c.pid);
      left != molds_leaving.end()) {
    molds_leaving.erase(left);
    PM_LOG(LogLevel::Debug, "mold " + std::to_string(c.pid) + " left: " + describe(c));
    return true;
  }
  auto it = std::find_if(molds.begin(), molds.end(),
                         [&c](const std::unique_ptr<Mold>& m) { return m->pid() == c.pid; });
  if (it == molds.end()) return false;
  if (std::string why; !(*it)->booted() && (*it)->read_boot(why) != Mold::Boot::Ready) {
    // It died while booting: what it said, or how it ended.
    const bool current_one = (*it)->generation() == current_gen();
    (*it)->forget_pid();
    molds.erase(it);
    publish_mold();
    if (current_one)
      on_mold_boot_failure(why +
                           (why == "it died while booting" ? " (it " + describe(c) + ")" : ""));
    return true;
  }
  const std::uint64_t now = monotonic_ns();
  const std::string line = mold_name(**it) + " " + describe(c) + " after " +
                           seconds_text(now - (*it)->started_at_ns()) +
                           "; its workers keep serving";
  const bool current_one = (*it)->generation() == current_gen();
  const std::uint64_t lived_ns = now - (*it)->started_at_ns();
  (*it)->forget_pid(); // reaped: its pid may be another process's now
  molds.erase(it);
  publish_mold();
  if (!current_one || !can_spawn(state)) {
    PM_LOG(LogLevel::Notice, line);
    return true;
  }
  CrashPolicy::Decision d = crashes.on_crash(mold_slot(), lived_ns, now);
  d.log = true; // one process, restarted with backoff: its line is never one of a burst
  mold_restart_at_ns = d.respawn_at_ns;
  log_crash(
      LogLevel::Error,
      line + "; a new mold starts" +
          (d.respawn_at_ns > now ? " in " + seconds_text(d.respawn_at_ns - now) : std::string()),
      d);
  return true;
}

// A mold leaves with its generation: all of them once the master stops.
void Master::Impl::retire_molds() {
  for (auto it = molds.begin(); it != molds.end();) {
    const std::uint32_t gen = (*it)->generation();
    const bool wanted =
        can_spawn(state) &&
        (gen == current_gen() || (state == State::Reloading && gen == gens.previous_number()));
    if (wanted) {
      ++it;
      continue;
    }
    PM_LOG(LogLevel::Info, mold_name(**it) + " leaves with its generation");
    molds_leaving.push_back((*it)->pid());
    it = molds.erase(it); // killed
  }
  publish_mold(); // also after an abandoned reload: the previous generation's mold again
}

} // namespace process_manager
