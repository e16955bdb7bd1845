#pragma once
// Whether the worker, with no connection open, should try accept4 at once (the fast path) or
// wait in epoll first. Pure: counts only (tests/unit/test_accept_probe.cpp).
//
// Why: under load the listen queue is rarely empty, and an accept4 without waiting takes the
// next connection for one system call. But with one client in a closed loop (its next
// connection comes only after this answer) the queue is always empty at that moment, and each
// try costs an accept4 that fails (EAGAIN) before the epoll_wait anyway: 6 system calls a
// request instead of 5. So after a try finds the queue empty the next connections are taken
// through epoll, and the tries space out, doubling up to kMaxGap; a try that finds a
// connection restores the fast path at once.
#include <algorithm>

namespace fcgi_host {

class AcceptProbe {
public:
  static constexpr unsigned kMaxGap = 32;

  // Try accept4 without waiting now?
  bool try_now() {
    if (skip_ == 0) return true;
    --skip_;
    return false;
  }
  // What the try found.
  void found(bool connection) {
    if (connection) {
      gap_ = 0;
      return;
    }
    gap_ = gap_ == 0 ? 1 : std::min(gap_ * 2, kMaxGap);
    skip_ = gap_;
  }

private:
  unsigned gap_ = 0;  // tries skipped after the last empty one
  unsigned skip_ = 0; // still to skip
};

} // namespace fcgi_host
