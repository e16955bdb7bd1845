// --idle-work-after: the handler's on_idle() in a lane that had no request for that long, once
// per idle period (app/handler.hpp). The loop keeps the time for every lane: a lane's idle period
// begins when its request finished (finish_work() marks it; the loop stamps it at its next clock
// read, so a request pays no clock read for it), and ends with its next request.
//   one thread    the loop runs on_idle() itself: the worker takes no request meanwhile, and its
//                 kept connections go to other workers as from a busy handler's (the watch's
//                 table lock is given up around it, and the slot says Handling);
//   threads       the lane's thread runs it as a job of its own: the lane is busy, so the loop
//                 gives its requests to the other threads (or holds them) until it ends.
// --trim-when-idle adds malloc_trim(0) (glibc's arenas grow with threads and give little back
// by themselves), once per worker: in the first lane's idle work.
#include "fcgi_host/worker/worker_loop.hpp"

#include "process_manager/clock.hpp"
#include "process_manager/log.hpp"

#include <exception>
#include <malloc.h>

namespace fcgi_host {

using process_manager::LogLevel;
using process_manager::WorkerState;

// The nearest moment a lane's idle work is due (0: none), stamping the idle periods that began
// since the last turn with `now`.
std::uint64_t WorkerLoop::next_idle_work(std::uint64_t now) {
  std::uint64_t earliest = 0;
  for (auto& lane : lanes_) {
    if (lane->busy || lane->idle_done) continue;
    if (lane->idle_since_ns == 0) lane->idle_since_ns = now;
    const std::uint64_t due = lane->idle_since_ns + settings_.idle_work_after_ns;
    if (earliest == 0 || due < earliest) earliest = due;
  }
  return earliest;
}

// At a turn of the loop: the idle work of each lane whose time came, unless the worker stops or
// takes no work.
void WorkerLoop::run_due_idle_work(std::uint64_t now) {
  if (stopping() || quarantined_) return;
  for (auto& lane : lanes_) {
    if (lane->busy || lane->idle_done || lane->idle_since_ns == 0 ||
        now - lane->idle_since_ns < settings_.idle_work_after_ns)
      continue;
    lane->idle_done = true;
    if (threads_) {
      start_idle_job(*lane);
      continue;
    }
    slot_.state.store(WorkerState::Handling, std::memory_order_relaxed);
    watch_.handler_starts(); // as for a slow handler: its kept connections may move
    run_idle_work(*lane, settings_.trim_when_idle);
    watch_.handler_returned();
    count_idle_work(now);
  }
}

// A handler thread's idle work: its lane is busy with it (no request goes to it) until the
// thread says it is done (on_lane_without_connection()).
void WorkerLoop::start_idle_job(Lane& lane) {
  take_lane(lane);
  lane.idle_job = true;
  lane.start_ns = process_manager::monotonic_ns();
  threads_->hand_over(lane);
  if (!admitting()) set_accepting(false);
  publish_lanes();
}

void WorkerLoop::end_idle_job(Lane& lane) {
  lane.idle_job = false;
  count_idle_work(lane.start_ns);
  release_lane(lane);
}

// On the thread that runs it: on_idle() in a boundary of its own (an exception is a line, never
// a dead worker), then malloc_trim for the worker (the first lane's).
void WorkerLoop::run_idle_work(Lane& lane, bool trim) {
  try {
    lane.handler->on_idle();
  } catch (const std::exception& e) {
    PM_LOG(LogLevel::Error, std::string("on_idle failed: ") + e.what());
  } catch (...) {
    PM_LOG(LogLevel::Error, "on_idle failed: unknown exception");
  }
  if (trim && lane.index == 0) ::malloc_trim(0);
}

// The status page's figures: how often, and how long in all.
void WorkerLoop::count_idle_work(std::uint64_t started_ns) {
  const std::uint64_t now = process_manager::monotonic_ns();
  process_manager::single_writer_add(host_.idle_work_runs, 1);
  process_manager::single_writer_add(host_.idle_work_ns, now > started_ns ? now - started_ns : 0);
}

} // namespace fcgi_host
