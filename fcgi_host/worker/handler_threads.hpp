#pragma once
// --threads T: the handler threads of a worker (docs/architecture.md, "Threads"). The worker's
// loop stays the only thread that touches sockets: it frames and decodes a request into a free
// lane, hands the lane to that lane's thread (a queue of one complete request), and the thread
// runs the handler and encodes the response, whose bytes come back through the lane's bounded
// output (deliver()) while the handler still runs, the loop woken by an eventfd. A thread that
// writes faster than its client reads waits on the lane (the bound), not the loop; a gone client
// ends its writes. The loop writes the bytes, takes the lane back when the thread is done, and
// does what it does after any request (metrics, logs, keep or close).
//
// Threads are made in the worker, after fork, with every signal blocked (the loop's signalfd
// takes them); each thread gets its handler instance (its own, or the one shared when the
// handler says it is thread-safe) and calls on_thread_start()/on_thread_stop() on it.
//
// Lane 0 has no thread of its own: the loop's thread is its thread (loop_relay.hpp). It runs
// lane 0's requests itself while a relay stands by to take the loop over from it, and makes
// lane 0's instance and calls on_thread_start()/on_thread_stop() on it, as the others do.
#include "fcgi_host/worker/handler_factory.hpp"
#include "fcgi_host/worker/loop_relay.hpp"
#include "fcgi_host/worker/request_lane.hpp"
#include "process_manager/scoreboard.hpp"

#include <atomic>
#include <condition_variable>
#include <csignal>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace fcgi_host {

// While one lives, the calling thread blocks every signal but the fatal ones, and so does every
// thread it starts: the loop's signalfd takes the worker's signals, and a stop never lands in a
// handler thread (a fault raised while its signal is blocked would kill the process without its
// handler, Linux resetting it, and the crash report would be lost).
class ThreadSignalMask {
public:
  ThreadSignalMask();
  ~ThreadSignalMask();
  ThreadSignalMask(const ThreadSignalMask&) = delete;
  ThreadSignalMask& operator=(const ThreadSignalMask&) = delete;

private:
  sigset_t saved_;
};

class HandlerThreads {
public:
  // `respond` runs on a lane's thread for each request: the handler, then the response encoded
  // (through Lane::codec, whose bytes go to deliver()).
  using Respond = std::function<void(Lane&)>;

  // A thread for each of `lanes` (the worker's, which outlive this).
  HandlerThreads(process_manager::WorkerSlot& slot, std::vector<std::unique_ptr<Lane>>& lanes);
  ~HandlerThreads();
  HandlerThreads(const HandlerThreads&) = delete;
  HandlerThreads& operator=(const HandlerThreads&) = delete;

  // Starts the threads (lanes 1 on), and makes lane 0's instance on the calling thread (the
  // loop's): each gets `shared` (thread-safe) or its own instance from `make`. `relay`: what
  // lane 0's handler asks before it waits for the loop. An error text when a thread could not
  // start or an on_thread_start threw.
  std::string start(app::Handler& shared, bool thread_safe, const HandlerFactory& make,
                    Respond respond, LoopRelay& relay);

  // The request decoded into `lane` runs on its thread.
  void hand_over(Lane& lane);
  // Lane 0's seam, set for a new request on the loop's thread (hand_over() does it for the
  // others).
  static void prepare(Lane& lane);
  // Makes the loop's wait return (the eventfd).
  void wake_loop();
  // The lane is the loop's again (after its request was finished or cut).
  static void release(Lane& lane);
  // On the lane's thread, at Response::finish(): the response's end is in the lane's output;
  // the loop lets the connection go once it took it, while the handler goes on. Returns then.
  static void response_ended(Lane& lane);
  // The fd the loop watches: readable when some lane has output or is done.
  int event_fd() const { return event_fd_; }
  // The lanes that have news since the last call (the eventfd is read).
  std::vector<Lane*> take_news();
  // The loop took `lane`'s output (or gave up on it): the thread may go on writing.
  static void output_taken(Lane& lane);

  // The codec's delivery (RequestCodec::deliver_to), on the thread that encodes: appends to the
  // lane's output and wakes the loop; on a handler thread, waits while the loop holds more than
  // kLaneOutputBound. False once the client is gone.
  static bool deliver(void* lane, const char* data, std::size_t size);

  // The lane whose thread this is (crash handler: async-signal-safe), or nullptr.
  Lane* lane_of_thread(pid_t tid);

  // Lane 0, run by the loop's thread, which holds the loop again: done, as a thread says it
  // (the loop then takes its end).
  static void loop_lane_done(Lane& lane);

private:
  // A thread's start: its ids, its instance, on_thread_start(). An error text, or empty.
  std::string begin_thread(Lane& lane, app::Handler& shared, bool thread_safe,
                           const HandlerFactory& make);
  void stop_thread(Lane& lane); // on_thread_stop(), on the lane's thread
  void run(Lane& lane, app::Handler& shared, bool thread_safe, const HandlerFactory& make);
  void notify_loop(Lane& lane);
  // Before lane 0's handler waits for the loop (which is its own thread): the relay takes it.
  static void hand_loop_on(Lane& lane) {
    if (lane.index == 0) lane.owner->relay_->hand_on_now();
  }

  process_manager::WorkerSlot& slot_;
  std::vector<std::unique_ptr<Lane>>& lanes_;
  std::vector<std::thread> threads_; // lanes 1 on (lane 0's is the loop's)
  Respond respond_;
  LoopRelay* relay_ = nullptr;
  bool started_lane0_ = false; // lane 0's on_thread_start() went well (on_thread_stop() follows)
  int event_fd_ = -1;
  std::mutex news_mutex_;
  std::vector<Lane*> news_; // guarded by news_mutex_

  // Start-up: each thread reports whether its on_thread_start went well.
  std::mutex start_mutex_;
  std::condition_variable started_;
  std::size_t started_count_ = 0;
  std::string start_error_;
};

} // namespace fcgi_host
