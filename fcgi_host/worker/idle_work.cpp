// --idle-work-after: the handler's on_idle() in a lane that had no request for that long, once
// per idle period (app/handler.hpp). The loop looks at its lanes every --idle-work-after (a
// periodic timerfd in its epoll, periodic_timer.hpp): a lane that is not busy and began no request
// since the last look is idle, and runs its idle work once, until its next request. So it runs
// between one and two periods after the lane's last request, and a request pays nothing for it: no
// clock read, no store (the lane's request number, which begin() writes anyway, says whether it
// served). Once every lane has run its idle work the timer pauses, so an idle worker sleeps; the
// next request resumes it (one test of a flag per request, one system call per idle period).
//   one thread    the loop runs on_idle() itself: the worker takes no request meanwhile, and its
//                 kept connections go to other workers as from a busy handler's (the watch's
//                 table lock is given up around it, and the slot says Handling);
//   threads       the lane's thread runs it as a job of its own: the lane is busy, so the loop
//                 gives its requests to the other threads (or holds them) until it ends; lane 0's
//                 thread is the loop's (loop_relay.hpp), whose relay stands by meanwhile.
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

void WorkerLoop::look_at_idle_lanes(std::uint64_t now) {
  if (stopping() || quarantined_) return;
  bool all_done = true; // every lane idle, its idle work run: nothing to look at until a request
  bool loop_lane_idle = false;
  for (auto& lane : lanes_) {
    all_done = all_done && !lane->busy && lane->idle_done &&
               lane->request_number == lane->idle_seen_request;
    if (lane->busy) continue;
    if (lane->request_number != lane->idle_seen_request) { // it served since: a new period
      lane->idle_seen_request = lane->request_number;
      lane->idle_done = false;
      continue;
    }
    if (lane->idle_done) continue;
    lane->idle_done = true;
    if (threads_) {
      if (lane->index == 0)
        loop_lane_idle = true; // (last: the regent may hold the loop meanwhile)
      else
        start_idle_job(*lane);
      continue;
    }
    slot_.state.store(WorkerState::Handling, std::memory_order_relaxed);
    watch_.handler_starts(); // as for a slow handler: its kept connections may move
    run_idle_work(*lane, settings_.trim_when_idle);
    watch_.handler_returned();
    count_idle_work(now);
  }
  if (all_done) idle_timer_.pause(); // begin() resumes it with the next request
  if (loop_lane_idle) idle_work_on_loop_thread(*lanes_[0]);
}

// Lane 0's idle work, with threads: on the loop's thread (its thread), the relay standing by as
// for its requests (run_on_loop_thread()).
void WorkerLoop::idle_work_on_loop_thread(Lane& lane) {
  take_lane(lane);
  lane.idle_job = true;
  lane.start_ns = process_manager::monotonic_ns();
  if (!admitting()) set_accepting(false);
  relay_.handler_starts();
  run_idle_work(lane, settings_.trim_when_idle);
  if (relay_.handler_returned()) after_regent();
  end_idle_job(lane);
  resume_held();
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
