// When and how a kept connection moves to another worker (handoff_channel.hpp says why).
//
// Two moments:
//  - A stopping worker whose pool goes on (retired at a reload, an upgrade or a TTOU, or
//    recycling) passes on each kept connection between two requests, or with the part of a
//    request it read, from its own loop: at once, after each response, and at each idle
//    deadline while the channel was full. It never closes one, and it never passes one to a
//    worker that stops too (a retiring worker does not watch the channel): nginx does not
//    retry a POST that failed on a kept connection, and any close of a kept connection may
//    meet a request already on its way. The channel holds a connection in flight until a
//    worker that goes on reads it, even one not started yet (a recycled single worker's
//    replacement, a new master's workers).
//  - A worker whose handler runs long cannot look at its other connections: the master nudges
//    it, and the worker's SlowHandlerWatch thread (slow_handler_watch.hpp) calls on_nudge()
//    with the table lock held, which passes the waiting connections on.
// When the whole host stops (TERM) nobody goes on: each worker then takes what waits in the
// channel as it stops (worker_loop.cpp, begin_stop()), and never passes one on.
#include "fcgi_host/worker/worker_loop.hpp"

#include "process_manager/clock.hpp"

#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

namespace fcgi_host {
namespace {

// Bytes the peer sent that nobody has read yet (a request on its way); errors count as some.
bool bytes_waiting(int fd) {
  int n = 0;
  return ::ioctl(fd, FIONREAD, &n) != 0 || n > 0;
}

// A worker told to retire (QUIT) while its handler runs moves its kept connections then,
// instead of after the handler.
bool retire_pending() {
  sigset_t pending;
  return sigpending(&pending) == 0 && sigismember(&pending, SIGQUIT) == 1;
}

} // namespace

using process_manager::WorkerState;

// Is there a worker to take a connection? `need_free`: one waiting in its loop now (a slow
// handler's connections are worth moving only to a worker that can serve them at once);
// otherwise any worker that goes on: another of this pool not stopping, a new master's after
// an upgrade, or this one's replacement when it recycles. None when the whole host stops
// (TERM): passing connections among stopping workers only moves the moment they are closed.
bool WorkerLoop::can_hand_off(bool need_free) const {
  if (!settings_.handoff.enabled()) return false;
  if (!need_free) {
    if (stop_ == Stop::Drain) return false;
    if (recycle_reason_ || scoreboard_.pool().successor_master.load(std::memory_order_acquire))
      return true;
  }
  for (std::size_t i = 0; i < scoreboard_.used(); ++i) {
    if (i == slot_index_) continue;
    const process_manager::WorkerSlot& s = scoreboard_.slot(i);
    if (s.pid.load(std::memory_order_relaxed) == 0) continue;
    WorkerState state = s.state.load(std::memory_order_relaxed);
    if (state == WorkerState::Stopping || state == WorkerState::Free) continue;
    if (!need_free || process_manager::is_waiting(state)) return true;
  }
  return false;
}

// Passes one connection on, if it is between requests or holds only part of one. False when it
// stays here (a response or a refusal is under way, or the channel is full); true when it is
// gone from this worker.
bool WorkerLoop::hand_off(Connection& c) {
  if (c.phase == Connection::Phase::Writing || c.phase == Connection::Phase::Draining ||
      c.phase == Connection::Phase::Serving || !c.replies.empty() ||
      c.in.size() > kMaxHandoffBytes || c.fd == serving_fd_ || c.pump)
    return false;
  const bool was_watched = c.in_epoll;
  if (was_watched) epoll_.remove(c.fd);
  c.in_epoll = false;
  if (!settings_.handoff.send(c.fd, std::string_view(c.in.data(), c.in.size()))) {
    // It stays; watched again as before (a failure to do so closes it: gone all the same).
    return was_watched && !watch_readable(c);
  }
  ::close(c.fd);
  process_manager::single_writer_add(host_.handed_off, 1);
  forget_connection(c);
  return true;
}

void WorkerLoop::hand_off_waiting(int except_fd) {
  table_.for_each([&](Connection& c) {
    if (c.fd != except_fd) hand_off(c);
  });
}

// A stopping worker's connection that is between requests or waits for more of one: true when
// it is gone from here. With a worker to go on, it is passed on (or, the channel full, stays
// for the next try). With none (the whole host stops), a kept connection is closed only when
// that loses the least: idle between requests with nothing read and nothing waiting in the
// socket, and, right after a response, only once kStopServeNs of serving is over.
bool WorkerLoop::release_when_stopping(Connection& c, bool idle_deadline) {
  if (can_hand_off(false)) return hand_off(c);
  if (c.phase != Connection::Phase::KeptIdle || !c.between_requests() || bytes_waiting(c.fd))
    return false;
  if (!idle_deadline && process_manager::monotonic_ns() < stop_serving_until_) return false;
  close_connection(c);
  return true;
}

// On the watch's thread, the table lock held, while a handler runs: a slow handler's other
// connections go to a free worker; a retiring worker's (the master nudges it with the stop) to
// any worker that goes on, without waiting for the handler. A nudge for a request that is over
// (`request_start_ns` is not the running one's: this worker was kept off the CPU, not slow, and
// is in its next request now) is ignored: moving its connections would only cost.
void WorkerLoop::on_nudge(std::uint64_t request_start_ns) {
  if (request_start_ns != 0 &&
      request_start_ns != lanes_[0]->slot.request_start_ns.load(std::memory_order_relaxed))
    return;
  if (can_hand_off(true) || (retire_pending() && can_hand_off(false)))
    hand_off_waiting(serving_fd_);
}

} // namespace fcgi_host
