#pragma once
// The worker's epoll instance, closed with it. Every fd is registered with its own number as
// the event's data: that is how the event loop tells the listening socket, the signalfd, the
// handoff channel and each connection apart.
#include "fcgi_host/net/plain_syscalls.hpp"

#include <cstdint>
#include <sys/epoll.h>

namespace fcgi_host {

class EpollSet {
public:
  EpollSet(); // ok() says whether epoll_create1 succeeded (errno tells why not)
  ~EpollSet();
  EpollSet(const EpollSet&) = delete;
  EpollSet& operator=(const EpollSet&) = delete;

  bool ok() const { return fd_ >= 0; }

  // False (errno set) when epoll_ctl fails.
  bool add(int fd, std::uint32_t events) { return control(EPOLL_CTL_ADD, fd, events); }
  bool modify(int fd, std::uint32_t events) { return control(EPOLL_CTL_MOD, fd, events); }
  // Closing an fd also takes it out, as long as no other process holds its description; a
  // connection handed off, or the listening socket, is removed first.
  void remove(int fd) { epoll_ctl(fd_, EPOLL_CTL_DEL, fd, nullptr); }

  // epoll_wait; -1 with errno on failure (EINTR included).
  int wait(epoll_event* events, int max_events, int timeout_ms) {
    return plain::epoll_wait(fd_, events, max_events, timeout_ms);
  }

private:
  bool control(int op, int fd, std::uint32_t events) {
    epoll_event ev{};
    ev.events = events;
    ev.data.fd = fd;
    return epoll_ctl(fd_, op, fd, &ev) == 0;
  }

  int fd_;
};

} // namespace fcgi_host
