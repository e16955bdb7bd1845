#include "process_manager/master_impl.hpp"

#include "process_manager/clock.hpp"
#include "process_manager/log.hpp"

#include <exception>

namespace process_manager {

// HUP: reload by generations. The new generation starts; the old one retires once it is ready.
void Master::Impl::on_hup() {
  if (state == State::Reloading) {
    gens.queue_reload();
    PM_LOG(LogLevel::Notice, "HUP: reload to generation " + std::to_string(current_gen()) +
                                 " in progress; next reload queued");
    return;
  }
  if (!can_override(state, State::Reloading)) return;
  notifier.reloading();
  std::optional<Generation> next;
  try {
    if (options.reload) next = options.reload();
  } catch (const std::exception& e) {
    PM_LOG(LogLevel::Error, std::string("reload: ") + e.what());
  }
  if (!next) {
    PM_LOG(LogLevel::Error, "reload failed, keeping generation " + std::to_string(current_gen()));
    notifier.notify("READY=1");
    return;
  }
  begin_reload(std::move(*next));
  PM_LOG(LogLevel::Notice, "HUP: starting generation " + std::to_string(current_gen()) + " (" +
                               std::to_string(current().pool.workers) + " worker(s))");
}

// The new generation starts beside the current one, which serves until it is ready.
void Master::Impl::begin_reload(Generation next) {
  gens.begin(std::move(next), monotonic_ns());
  state = State::Reloading;
  begin_rollout(); // --rollout canary: only the canary workers start
}

// --reload-grace: the generation of the last reload keeps crashing; its predecessor's
// configuration comes back as a new generation (a reload of its own, with its own checks).
void Master::Impl::go_back(const std::string& why) {
  Generations::Undo undo = gens.go_back(monotonic_ns());
  state = State::Reloading;
  PM_LOG(LogLevel::Error, why + ": generation " + std::to_string(undo.undone) +
                              " is undone (reload-grace); generation " +
                              std::to_string(current_gen()) + " runs generation " +
                              std::to_string(undo.restored) + "'s configuration again");
}

void Master::Impl::advance_reload() {
  if (rollout.active()) return advance_rollout();
  if (!generation_ready(current().pool.workers, members())) return;
  std::size_t retired = 0;
  for (Child& w : table.all())
    if (w.generation != current_gen() && !w.stopping()) {
      stop(w, StopReason::Retire);
      ++retired;
    }
  PM_LOG(LogLevel::Notice, "generation " + std::to_string(current_gen()) + " ready; retiring " +
                               std::to_string(retired) + " worker(s) of older generations");
  gens.complete(monotonic_ns()); // with --reload-grace, the previous configuration is kept
  if (rollout.running()) end_rollout(RolloutPhase::Promoted); // all at once
  end_reload();
}

void Master::Impl::abandon_reload(const std::string& why, const std::string& block) {
  PM_LOG_BLOCK(LogLevel::Error,
               why + "; abandoning generation " + std::to_string(current_gen()) +
                   ", keeping generation " + std::to_string(gens.previous_number()) +
                   (block.empty() ? "" : ":"),
               block);
  if (rollout.running()) end_rollout(RolloutPhase::Undone);
  drop_current_generation();
}

// The new generation's workers stop; the previous one is current again and refills the pool.
void Master::Impl::drop_current_generation() {
  for (Child& w : table.all())
    if (w.generation == current_gen()) // those already serving finish their requests
      stop(w, ready(w) ? StopReason::Retire : StopReason::Abandon);
  gens.abandon();
  end_reload();
}

void Master::Impl::end_reload() {
  state = State::Running;
  if (announced_ready) notifier.notify("READY=1");
  if (gens.take_queued_reload()) on_hup();
}

} // namespace process_manager
