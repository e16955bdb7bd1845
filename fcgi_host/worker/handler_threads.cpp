#include "fcgi_host/worker/handler_threads.hpp"

#include "fcgi_host/worker/connection.hpp"
#include "fcgi_host/worker/stream_heartbeat.hpp"
#include "process_manager/clock.hpp"
#include "process_manager/crash_report.hpp"
#include "process_manager/log.hpp"

#include <csignal>
#include <exception>
#include <pthread.h>
#include <sys/eventfd.h>
#include <system_error>
#include <unistd.h>

namespace fcgi_host {

using process_manager::LogLevel;
using process_manager::WorkerState;

HandlerThreads::HandlerThreads(process_manager::WorkerSlot& slot,
                               std::vector<std::unique_ptr<Lane>>& lanes)
    : slot_(slot), lanes_(lanes) {
  event_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (event_fd_ < 0) throw std::system_error(errno, std::generic_category(), "eventfd() failed");
  for (auto& lane : lanes_)
    lane->owner = this;
}

HandlerThreads::~HandlerThreads() {
  for (auto& lane : lanes_) {
    std::lock_guard lock(lane->mutex);
    lane->quit = true;
    lane->client_gone = true;
    lane->changed.notify_all();
  }
  for (std::size_t i = 0; i < threads_.size(); ++i) {
    Lane& lane = *lanes_[i + 1];
    if (lane.cut) {
      // Still inside a handler that overran --request-timeout: it ends with the process, and
      // its handler instance is not destroyed under it.
      threads_[i].detach();
      lane.own.release();
      continue;
    }
    threads_[i].join();
  }
  // Lane 0's thread is this one: its handler returned, or it would not be here.
  if (started_lane0_) stop_thread(*lanes_[0]);
  if (event_fd_ >= 0) ::close(event_fd_);
}

ThreadSignalMask::ThreadSignalMask() {
  sigset_t all;
  sigfillset(&all);
  for (int sig = 1; sig < NSIG; ++sig)
    if (process_manager::is_fatal_signal(sig)) sigdelset(&all, sig);
  pthread_sigmask(SIG_BLOCK, &all, &saved_);
}

ThreadSignalMask::~ThreadSignalMask() {
  pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
}

std::string HandlerThreads::start(app::Handler& shared, bool thread_safe,
                                  const HandlerFactory& make, Respond respond, LoopRelay& relay) {
  respond_ = std::move(respond);
  relay_ = &relay;
  {
    ThreadSignalMask mask; // (the threads inherit it)
    for (std::size_t i = 1; i < lanes_.size(); ++i) {
      try {
        threads_.emplace_back([this, &lane = *lanes_[i], &shared, thread_safe, &make] {
          run(lane, shared, thread_safe, make);
        });
      } catch (const std::system_error& e) {
        return std::string("handler thread: ") + e.what();
      }
    }
  }
  std::string error = begin_thread(*lanes_[0], shared, thread_safe, make);
  started_lane0_ = error.empty();
  std::unique_lock lock(start_mutex_);
  started_.wait(lock, [this] { return started_count_ == threads_.size(); });
  return error.empty() ? start_error_ : error;
}

std::string HandlerThreads::begin_thread(Lane& lane, app::Handler& shared, bool thread_safe,
                                         const HandlerFactory& make) {
  const pid_t tid = static_cast<pid_t>(gettid());
  lane.tid.store(tid, std::memory_order_relaxed);
  lane.slot.tid.store(tid, std::memory_order_relaxed);
  lane.slot.state.store(WorkerState::Idle, std::memory_order_relaxed);
  try {
    if (thread_safe) {
      lane.handler = &shared;
    } else {
      lane.own = make();
      lane.handler = lane.own.get();
    }
    lane.handler->on_thread_start();
  } catch (const std::exception& e) {
    return "handler thread " + std::to_string(lane.index) + ": " + e.what();
  }
  return {};
}

void HandlerThreads::stop_thread(Lane& lane) {
  try {
    lane.handler->on_thread_stop();
  } catch (const std::exception& e) {
    PM_LOG(LogLevel::Error, "on_thread_stop failed in handler thread " +
                                std::to_string(lane.index) + ": " + e.what());
  }
}

namespace {

// Under the lane's mutex.
void reset_seam(Lane& lane) {
  lane.done = lane.responded = lane.let_go = false;
  lane.client_gone = false;
  lane.delivered = 0;
  lane.on_thread = true;
  lane.encoding_end = false;
  lane.event_stream = lane.between_events = false;
}

} // namespace

// Lane 0's, on the loop's thread before its handler: no other thread has the lane (the relay's
// regent takes the loop only once the handler began, after these stores).
void HandlerThreads::prepare(Lane& lane) {
  reset_seam(lane);
}

void HandlerThreads::hand_over(Lane& lane) {
  {
    std::lock_guard lock(lane.mutex);
    reset_seam(lane);
    lane.job = true;
  }
  // After the unlock: a thread woken while the loop still holds the mutex would only wait for it
  // (two more futex calls per request).
  lane.changed.notify_all();
}

void HandlerThreads::wake_loop() {
  std::uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(event_fd_, &one, sizeof one);
}

// Waits until the loop wrote the response and let the connection go (or gave up on its client):
// what the handler does next, a crash too, no longer touches its client's answer.
void HandlerThreads::response_ended(Lane& lane) {
  hand_loop_on(lane);
  std::unique_lock lock(lane.mutex);
  lane.responded = true;
  lock.unlock();
  lane.owner->notify_loop(lane);
  lock.lock();
  lane.waiting_for_room.store(true, std::memory_order_release);
  lane.changed.wait(lock, [&lane] { return lane.let_go || lane.client_gone; });
  lane.waiting_for_room.store(false, std::memory_order_relaxed);
}

// After its thread said it is done (under the mutex, which the loop took since), the thread
// touches nothing of the lane but `job` and `quit` until its next hand_over(): no lock. An inline
// lane's heartbeat thread looks at the stream's flags at any time: under the mutex.
void HandlerThreads::release(Lane& lane) {
  lane.events = false;
  std::unique_lock lock(lane.mutex, std::defer_lock);
  if (!lane.owner) lock.lock();
  lane.output.clear();
  lane.done = lane.responded = lane.let_go = false;
  lane.on_thread = false;
  lane.event_stream = lane.between_events = false;
}

std::vector<Lane*> HandlerThreads::take_news() {
  std::uint64_t count; // one read takes every wake-up so far (an eventfd counter)
  [[maybe_unused]] ssize_t n = ::read(event_fd_, &count, sizeof count);
  std::vector<Lane*> news;
  std::lock_guard lock(news_mutex_);
  news.swap(news_);
  for (Lane* lane : news)
    lane->in_news = false;
  return news;
}

// Only a thread that waits for room is woken (a thread idle between requests waits on the same
// condition for its next job: waking it for nothing cost two futex calls per request).
void HandlerThreads::output_taken(Lane& lane) {
  if (lane.waiting_for_room.load(std::memory_order_acquire)) lane.changed.notify_all();
}

void HandlerThreads::notify_loop(Lane& lane) {
  bool wake = false;
  {
    std::lock_guard lock(news_mutex_);
    if (!lane.in_news) {
      lane.in_news = true;
      wake = news_.empty();
      news_.push_back(&lane);
    }
  }
  if (wake) wake_loop();
}

bool HandlerThreads::deliver(void* context, const char* data, std::size_t size) {
  Lane& lane = *static_cast<Lane*>(context);
  std::unique_lock lock(lane.mutex);
  if (lane.client_gone) return false;
  lane.between_events = false; // until the flush that delivers this ends (LaneSink::flush)
  lane.output.append(data, size);
  lane.delivered += size;
  if (!lane.on_thread) return true; // made on the loop: it takes the bytes itself, after
  // The response's end (a buffered response whole, or a streamed one's last records): the loop
  // takes it with `done`.
  if (lane.encoding_end && lane.output.size() <= kLaneOutputBound) return true;
  if (lane.index == 0) { // (the loop's own thread: the relay takes the loop to write this)
    lock.unlock();
    hand_loop_on(lane);
    lock.lock();
  }
  lane.owner->notify_loop(lane);
  lane.waiting_for_room.store(true, std::memory_order_release);
  lane.changed.wait(lock,
                    [&lane] { return lane.output.size() <= kLaneOutputBound || lane.client_gone; });
  lane.waiting_for_room.store(false, std::memory_order_relaxed);
  return !lane.client_gone;
}

// Inline (one thread, heartbeats on): each write of an event stream under the lane's mutex, so
// that the heartbeat thread (stream_heartbeat.hpp) writes only between two events; any other
// streamed response goes straight to the codec (no lock, no clock: the heartbeat thread never
// touches it, and `events` is written only on this thread). On a handler thread: the flags under
// the mutex, the write outside it (deliver() takes the mutex itself).
void LaneSink::send_head(const app::Response& response) {
  const bool events = response.header("Content-Type").starts_with("text/event-stream");
  if (!lane_.owner) {
    std::lock_guard lock(lane_.mutex);
    lane_.codec.sink().send_head(response);
    lane_.between_events = false;
    lane_.event_stream = lane_.events = events;
    lane_.last_output_ns = process_manager::monotonic_ns();
    if (lane_.connection) lane_.request_id = lane_.connection->guard.request_id();
    if (events && lane_.heartbeat) lane_.heartbeat->stream_began();
    return;
  }
  {
    std::lock_guard lock(lane_.mutex);
    lane_.between_events = false;
    lane_.event_stream = events;
  }
  lane_.codec.sink().send_head(response);
}

bool LaneSink::send_body(std::string_view chunk) {
  if (!lane_.owner && !lane_.events) return lane_.codec.sink().send_body(chunk);
  if (!lane_.owner) {
    std::lock_guard lock(lane_.mutex);
    lane_.between_events = false;
    lane_.last_output_ns = process_manager::monotonic_ns();
    return lane_.codec.sink().send_body(chunk);
  }
  {
    std::lock_guard lock(lane_.mutex);
    lane_.between_events = false;
  }
  return lane_.codec.sink().send_body(chunk);
}

bool LaneSink::flush() {
  if (!lane_.owner && !lane_.events) return lane_.codec.sink().flush();
  if (!lane_.owner) {
    std::lock_guard lock(lane_.mutex);
    bool ok = lane_.codec.sink().flush();
    lane_.between_events = true;
    lane_.last_output_ns = process_manager::monotonic_ns();
    return ok;
  }
  bool ok = lane_.codec.sink().flush();
  std::lock_guard lock(lane_.mutex);
  lane_.between_events = true;
  return ok;
}

Lane* HandlerThreads::lane_of_thread(pid_t tid) {
  for (auto& lane : lanes_)
    if (lane->tid.load(std::memory_order_relaxed) == tid) return lane.get();
  return nullptr;
}

void HandlerThreads::run(Lane& lane, app::Handler& shared, bool thread_safe,
                         const HandlerFactory& make) {
  process_manager::give_thread_alt_stack();
  std::string error = begin_thread(lane, shared, thread_safe, make);
  {
    std::lock_guard lock(start_mutex_);
    if (!error.empty() && start_error_.empty()) start_error_ = error;
    ++started_count_;
    started_.notify_all();
  }
  if (!error.empty()) return;
  for (;;) {
    {
      std::unique_lock lock(lane.mutex);
      lane.changed.wait(lock, [&lane] { return lane.job || lane.quit; });
      if (lane.quit) break;
      lane.job = false;
    }
    respond_(lane);
    {
      std::lock_guard lock(lane.mutex);
      lane.done = true;
      lane.on_thread = false;
    }
    notify_loop(lane);
  }
  stop_thread(lane);
}

// After LoopRelay::handler_returned(): the loop, and the lane, are this thread's alone.
void HandlerThreads::loop_lane_done(Lane& lane) {
  lane.done = true;
  lane.on_thread = false;
}

} // namespace fcgi_host
