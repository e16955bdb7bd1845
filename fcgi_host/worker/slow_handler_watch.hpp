#pragma once
// A worker whose handler runs long cannot look at its other connections. The master, which
// watches every slot's request start anyway, sends such a worker a nudge signal once its
// handler has run --handoff-after while it holds other connections and another worker waits
// (or with the QUIT that retires it). This watch is a small thread, blocked in sigwaitinfo() on
// that signal alone, that takes the worker's table lock (which the main thread gives up only
// while a handler runs) and lets the worker pass its waiting connections on
// (worker_handoff.cpp). Nothing of it runs while no handler is slow: the fast path pays an
// uncontended lock and unlock per request, no system call.
#include <cstdint>
#include <functional>
#include <mutex>
#include <thread>

namespace fcgi_host {

class SlowHandlerWatch {
public:
  SlowHandlerWatch() = default;
  ~SlowHandlerWatch() { stop(); }
  SlowHandlerWatch(const SlowHandlerWatch&) = delete;
  SlowHandlerWatch& operator=(const SlowHandlerWatch&) = delete;

  // Starts the thread. `on_nudge` runs on it, with the table lock held, for each nudge that
  // arrives while a handler runs, with the start (CLOCK_MONOTONIC ns) of the request the master
  // found slow, or 0 (a retiring worker's nudge: for any request). Blocks the nudge signal in the
  // calling thread (and so in every thread it starts), so that sigwaitinfo() alone takes it.
  void start(std::function<void(std::uint64_t request_start_ns)> on_nudge);
  // Ends the thread; the calling thread must not hold the table.
  void stop();

  // The main thread holds the table for as long as a Hold lives, except inside handlers.
  class Hold {
  public:
    explicit Hold(SlowHandlerWatch& w) : lock_(w.main_lock_) { lock_.lock(); }
    ~Hold() {
      if (lock_.owns_lock()) lock_.unlock();
    }
    Hold(const Hold&) = delete;
    Hold& operator=(const Hold&) = delete;

  private:
    std::unique_lock<std::mutex>& lock_;
  };

  // Around the handler, on the main thread (which holds the table): the table is free while
  // the handler runs.
  void handler_starts() {
    in_handler_ = true;
    main_lock_.unlock();
  }
  void handler_returned() {
    main_lock_.lock();
    in_handler_ = false;
  }

private:
  void wait_for_nudges();

  std::mutex table_mutex_;
  std::unique_lock<std::mutex> main_lock_{table_mutex_, std::defer_lock}; // the main thread's
  bool in_handler_ = false;                                               // guarded by table_mutex_
  bool quit_ = false;                                                     // guarded by table_mutex_
  std::function<void(std::uint64_t)> on_nudge_;
  std::thread thread_;
};

} // namespace fcgi_host
