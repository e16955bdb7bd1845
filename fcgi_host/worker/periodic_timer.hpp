#pragma once
// A periodic timer the worker's loop waits on in epoll, closed with it (a CLOCK_MONOTONIC
// timerfd): work that comes back every so often (--idle-work-after's look at the lanes) wakes the
// loop by itself, so the loop's per-request deadline arithmetic never carries it.
#include <cstdint>
#include <sys/timerfd.h>
#include <unistd.h>

namespace fcgi_host {

class PeriodicTimer {
public:
  PeriodicTimer() = default;
  ~PeriodicTimer() {
    if (fd_ >= 0) ::close(fd_);
  }
  PeriodicTimer(const PeriodicTimer&) = delete;
  PeriodicTimer& operator=(const PeriodicTimer&) = delete;

  // Fires every `every_ns` from now on. False (errno set) when it could not be made.
  bool start(std::uint64_t every_ns) {
    fd_ = ::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (fd_ < 0) return false;
    every_.tv_sec = static_cast<time_t>(every_ns / 1'000'000'000);
    every_.tv_nsec = static_cast<long>(every_ns % 1'000'000'000);
    return set(true);
  }
  int fd() const { return fd_; } // -1 until started
  // Stops firing until resume(): a loop with nothing to look at sleeps until an event of its own.
  void pause() { set(false); }
  void resume() { set(true); }
  bool paused() const { return paused_; }
  // Takes the expirations so far (the fd is readable until then).
  void take() {
    std::uint64_t expirations;
    [[maybe_unused]] ssize_t n = ::read(fd_, &expirations, sizeof expirations);
  }

private:
  bool set(bool firing) {
    itimerspec spec{};
    if (firing) spec.it_interval = spec.it_value = every_;
    paused_ = !firing;
    return ::timerfd_settime(fd_, 0, &spec, nullptr) == 0;
  }

  int fd_ = -1;
  timespec every_{};
  bool paused_ = false;
};

} // namespace fcgi_host
