#pragma once
// --threads T: the loop's thread runs requests itself, and hands the loop on when one overstays.
//
// Handing a request to another thread costs two context switches and a futex wake-up or two:
// more than a whole short request (a hello costs ~3 µs of CPU; the hand-over pinned on one CPU
// cost as much again). So the loop's thread is the first lane's thread (lane 0): a request that
// finds lane 0 free runs on the loop's thread, with nothing to wake, and the other lanes' threads
// take requests only while lane 0 is busy. A handler that waits (a database, a slow client, a
// lock) must not hold the loop, though: the relay is a standby thread, the regent, that looks
// every kRegentLooksEveryNs while lane 0's handler runs, and takes the loop over when the same
// handler is still running at two looks (so after one to two intervals): it runs the loop's
// turns (wait, dispatch, deadlines; lane 0 busy, its requests go to the other lanes' threads)
// until the loop's thread returns from its handler, which then takes the loop back at the end of
// the regent's turn. A handler that is about to wait for the loop itself (its output over the
// lane's bound, Response::finish(), a body read from the socket) hands it on at once.
// The pattern is the Go scheduler's (sysmon retakes a processor from a thread blocked in a
// system call): the fast path costs two atomic operations per request and no system call; the
// regent's looks cost one timed wait per interval while requests run, none while the worker is
// idle (it sleeps until the next request wakes it).
//
// The loop's state is touched by one thread at a time: the hand-overs are ordered by `state_`
// (acquire/release) and the mutex.
#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>

namespace fcgi_host {

class LoopRelay {
public:
  static constexpr std::uint64_t kRegentLooksEveryNs = 1'000'000;

  LoopRelay() = default;
  ~LoopRelay() { stop(); }
  LoopRelay(const LoopRelay&) = delete;
  LoopRelay& operator=(const LoopRelay&) = delete;

  // Starts the regent (in the calling thread's signal mask). `turn`: one turn of the loop, on the
  // regent while it holds the loop; `wake_loop`: makes the loop's wait return (its eventfd).
  // An error text when the thread could not start.
  std::string start(std::function<void()> turn, std::function<void()> wake_loop);
  // Ends the regent; called by the loop's thread while it holds the loop.
  void stop();

  // The loop's thread holds the loop and runs no handler: lane 0 is its to run.
  bool loop_on_own_thread() const { return state_.load(std::memory_order_relaxed) == kOwn; }

  // On the loop's thread, around a handler it runs (or lane 0's idle work): from handler_starts()
  // the regent may take the loop; handler_returned() holds it again (waiting for the regent's
  // turn to end when it took it) and says whether the regent took it meanwhile.
  void handler_starts();
  bool handler_returned();
  // Inside that handler, before it waits for the loop: the regent takes the loop now.
  void hand_on_now();

private:
  enum State : int {
    kOwn,      // the loop's thread holds the loop, outside a handler
    kHandler,  // ... inside lane 0's handler: the regent may take it
    kHandOn,   // ... inside it, and asks the regent to take it now
    kRegent,   // the regent holds the loop
    kWantBack, // the handler returned: the regent gives the loop back after its turn
  };
  void run();
  bool wait_for_a_handler(std::unique_lock<std::mutex>& lock);
  void rule();

  std::atomic<int> state_{kOwn};
  std::atomic<std::uint64_t> runs_{0}; // handlers begun on the loop's thread (its writer)
  std::atomic<bool> sleeping_{false};  // the regent waits without a timeout
  std::mutex mutex_;
  std::condition_variable regent_wakes_; // a handler began, hand_on_now(), stop()
  std::condition_variable loop_back_;    // the regent gave the loop back
  bool quit_ = false;                    // guarded by mutex_
  std::function<void()> turn_;
  std::function<void()> wake_loop_;
  std::thread thread_;
};

} // namespace fcgi_host
