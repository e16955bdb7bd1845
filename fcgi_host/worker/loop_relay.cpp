#include "fcgi_host/worker/loop_relay.hpp"

#include "process_manager/crash_report.hpp"

#include <chrono>
#include <system_error>

namespace fcgi_host {

std::string LoopRelay::start(std::function<void()> turn, std::function<void()> wake_loop) {
  turn_ = std::move(turn);
  wake_loop_ = std::move(wake_loop);
  try {
    thread_ = std::thread([this] { run(); });
  } catch (const std::system_error& e) {
    return std::string("loop relay thread: ") + e.what();
  }
  return {};
}

void LoopRelay::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    quit_ = true;
  }
  regent_wakes_.notify_all();
  thread_.join();
}

// The fast path: a count and a store, and a look at whether the regent sleeps (it does only
// after two looks found the loop's thread outside any handler, and no new one begun).
void LoopRelay::handler_starts() {
  // (One writer: a plain increment, no locked read-modify-write.)
  runs_.store(runs_.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
  state_.store(kHandler, std::memory_order_seq_cst);
  if (sleeping_.load(std::memory_order_seq_cst)) {
    std::lock_guard lock(mutex_);
    regent_wakes_.notify_one();
  }
}

bool LoopRelay::handler_returned() {
  int s = kHandler;
  if (state_.compare_exchange_strong(s, kOwn, std::memory_order_acq_rel)) return false;
  if (s == kHandOn && state_.compare_exchange_strong(s, kOwn, std::memory_order_acq_rel))
    return false;
  // The regent holds the loop: it gives it back once the turn it is in ends (woken from its
  // wait by the loop's eventfd).
  state_.store(kWantBack, std::memory_order_seq_cst);
  wake_loop_();
  std::unique_lock lock(mutex_);
  loop_back_.wait(lock, [this] { return state_.load(std::memory_order_acquire) == kOwn; });
  return true;
}

void LoopRelay::hand_on_now() {
  int s = kHandler;
  if (!state_.compare_exchange_strong(s, kHandOn, std::memory_order_acq_rel)) return;
  std::lock_guard lock(mutex_);
  regent_wakes_.notify_one();
}

// The regent: a look every interval while the loop's thread runs handlers; asleep otherwise.
void LoopRelay::run() {
  process_manager::give_thread_alt_stack(); // (a crash while it holds the loop is reported)
  std::unique_lock lock(mutex_);
  std::uint64_t seen_run = 0;
  int quiet_looks = 0;
  while (!quit_) {
    int s = state_.load(std::memory_order_acquire);
    const std::uint64_t run = runs_.load(std::memory_order_relaxed);
    if (s == kHandOn || (s == kHandler && run == seen_run)) {
      // The same handler at two looks (or one that asked): the loop is the regent's.
      if (state_.compare_exchange_strong(s, kRegent, std::memory_order_acq_rel)) {
        lock.unlock();
        rule();
        lock.lock();
      }
      continue;
    }
    quiet_looks = s == kOwn && run == seen_run ? quiet_looks + 1 : 0;
    seen_run = run;
    if (quiet_looks >= 2) {
      quiet_looks = 0;
      if (!wait_for_a_handler(lock)) return;
      continue;
    }
    regent_wakes_.wait_for(lock, std::chrono::nanoseconds(kRegentLooksEveryNs));
  }
}

// Asleep until the loop's thread begins a handler (its handler_starts() sees `sleeping_`).
// False: the relay stops.
bool LoopRelay::wait_for_a_handler(std::unique_lock<std::mutex>& lock) {
  sleeping_.store(true, std::memory_order_seq_cst);
  while (!quit_ && state_.load(std::memory_order_seq_cst) == kOwn)
    regent_wakes_.wait(lock);
  sleeping_.store(false, std::memory_order_relaxed);
  return !quit_;
}

// The loop's turns, until the loop's thread wants it back.
void LoopRelay::rule() {
  while (state_.load(std::memory_order_acquire) == kRegent)
    turn_();
  {
    std::lock_guard lock(mutex_);
    state_.store(kOwn, std::memory_order_release);
  }
  loop_back_.notify_one();
}

} // namespace fcgi_host
