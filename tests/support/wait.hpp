#pragma once
// Waiting for events in tests, never for time. Every wait is bounded by a deadline and returns
// whether the event came; the caller CHECKs or REQUIREs that. Where the kernel offers a real
// wait (a pidfd for a process exit, poll() on a socket) it is used; otherwise a condition is
// looked at every few milliseconds until it holds.
//
// The one other pause is `hold_for`: a delay that is itself the scenario under test (a job that
// takes a second, a client that trickles bytes), never a guess at how long something else takes.
#include "support/files.hpp"
#include "support/proc.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <optional>
#include <poll.h>
#include <string>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace test_wait {

using Millis = std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

// How often a condition without a kernel event is looked at: short against every bound used.
inline constexpr Millis kPollInterval{5};

namespace detail {

// Blocks for up to `ms` with no fd (poll(2) with none is a plain timed wait, EINTR-safe enough
// for a poll loop: the caller looks at its condition and its deadline again).
inline void pause_between_looks(Millis ms) {
  ::poll(nullptr, 0, static_cast<int>(ms.count()));
}

inline int ms_left(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<Millis>(deadline - Clock::now()).count();
  return left > 0 ? static_cast<int>(left) : 0;
}

} // namespace detail

// Looks at `pred` every `interval` until it holds or `timeout` passes; returns its last value.
template <class Pred> bool wait_until(Pred pred, Millis timeout, Millis interval = kPollInterval) {
  auto deadline = Clock::now() + timeout;
  for (;;) {
    if (pred()) return true;
    if (Clock::now() >= deadline) return pred();
    detail::pause_between_looks(std::min(interval, Millis{detail::ms_left(deadline) + 1}));
  }
}

// Holds the calling thread for `duration`: only for a delay that is part of the scenario.
inline void hold_for(Millis duration) {
  auto deadline = Clock::now() + duration;
  while (int left = detail::ms_left(deadline))
    detail::pause_between_looks(Millis{left});
}

// ---- processes ----------------------------------------------------------------------------------

// Exists and has not exited (a zombie has exited, though it still answers kill(pid, 0)).
inline bool process_running(pid_t pid) {
  auto s = test_support::proc_stat(pid);
  return s && s->running();
}

// Waits until `pid` has exited (zombie or gone), on a pidfd: no polling, no pid-reuse race once
// the pidfd is open. Any process, not only our children.
inline bool wait_process_exit(pid_t pid, Millis timeout) {
  // The system call itself: glibc 2.36's <sys/pidfd.h> lacks extern "C" for C++.
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return !process_running(pid); // ESRCH: gone already
  pollfd p{fd, POLLIN, 0};
  auto deadline = Clock::now() + timeout;
  int r;
  do
    r = ::poll(&p, 1, detail::ms_left(deadline));
  while (r < 0 && errno == EINTR);
  ::close(fd);
  return r == 1 || !process_running(pid);
}

// Waits for our child `pid` to exit and reaps it: its exit code, or 128 + signal; nullopt when it
// is still running at the timeout; -1 when it is not (or no longer) our child.
inline std::optional<int> wait_child_exit(pid_t pid, Millis timeout) {
  auto reap = [pid]() -> std::optional<int> {
    int status = 0;
    pid_t r = ::waitpid(pid, &status, WNOHANG);
    if (r == pid) return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    if (r < 0) return -1;
    return std::nullopt;
  };
  if (auto done = reap()) return done;
  if (!wait_process_exit(pid, timeout)) return reap();
  // It has exited: its status is there to collect, at once or within a few looks.
  std::optional<int> status;
  wait_until([&] { return (status = reap()).has_value(); }, Millis{1000}, Millis{1});
  return status;
}

// ---- files and logs -----------------------------------------------------------------------------

inline bool file_exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

inline bool wait_file(const std::string& path, Millis timeout) {
  return wait_until([&] { return file_exists(path); }, timeout);
}

using test_support::matching_lines;
using test_support::read_file;

// Waits until the file at `path` holds at least `count` lines matching `pattern`.
inline bool wait_log_line(const std::string& path, const std::string& pattern, Millis timeout,
                          std::size_t count = 1) {
  return wait_until([&] { return matching_lines(read_file(path), pattern).size() >= count; },
                    timeout);
}

// ---- sockets ------------------------------------------------------------------------------------

// Waits until `fd` is readable (data, or the peer closed); false at the timeout.
inline bool wait_readable(int fd, Millis timeout) {
  pollfd p{fd, POLLIN, 0};
  auto deadline = Clock::now() + timeout;
  int r;
  do
    r = ::poll(&p, 1, detail::ms_left(deadline));
  while (r < 0 && errno == EINTR);
  return r == 1;
}

} // namespace test_wait
