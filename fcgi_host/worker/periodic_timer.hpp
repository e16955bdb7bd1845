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
    itimerspec spec{};
    spec.it_interval.tv_sec = static_cast<time_t>(every_ns / 1'000'000'000);
    spec.it_interval.tv_nsec = static_cast<long>(every_ns % 1'000'000'000);
    spec.it_value = spec.it_interval;
    return ::timerfd_settime(fd_, 0, &spec, nullptr) == 0;
  }
  int fd() const { return fd_; } // -1 until started
  // Takes the expirations so far (the fd is readable until then).
  void take() {
    std::uint64_t expirations;
    [[maybe_unused]] ssize_t n = ::read(fd_, &expirations, sizeof expirations);
  }

private:
  int fd_ = -1;
};

} // namespace fcgi_host
