#pragma once
// read, send and epoll_wait for the worker's request path, as the bare system calls. glibc's
// wrappers of them are cancellation points: in a process of more than one thread (an in-process
// host, a worker with handler threads) each call switches asynchronous cancellation on and off
// around the system call, about 45 instructions a call and 90 a request. The host never cancels
// a thread (no pthread_cancel), so it has no use for them. Same results as the wrappers: -1 and
// errno.
#include <cstddef>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

namespace fcgi_host::plain {

inline ssize_t read(int fd, void* buf, std::size_t size) {
  return ::syscall(SYS_read, fd, buf, size);
}

inline ssize_t send(int fd, const void* buf, std::size_t size, int flags) {
  return ::syscall(SYS_sendto, fd, buf, size, flags, nullptr, 0);
}

// epoll_pwait without a mask is epoll_wait (the only form on some architectures).
inline int epoll_wait(int epfd, epoll_event* events, int max_events, int timeout_ms) {
  return static_cast<int>(
      ::syscall(SYS_epoll_pwait, epfd, events, max_events, timeout_ms, nullptr, 0));
}

} // namespace fcgi_host::plain
