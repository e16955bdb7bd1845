#include "fcgi_host/net/connect.hpp"

#include "fcgi_host/sys_error.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

namespace fcgi_host {

namespace {

void set_send_timeout(int fd, std::chrono::milliseconds t) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(t.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>(t.count() % 1000 * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

// One address: -1 with errno when it refused or the deadline passed. A blocking connect bounded
// by SO_SNDTIMEO, which Linux honours for TCP and Unix sockets alike: a non-blocking connect to
// a Unix socket whose backlog is full fails at once with EAGAIN instead of waiting for room.
int try_connect(int family, const sockaddr* addr, socklen_t len, SteadyClock::time_point deadline) {
  int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  auto left = std::chrono::milliseconds(std::max(poll_timeout_ms(deadline), 1));
  set_send_timeout(fd, left);
  if (::connect(fd, addr, len) == 0) {
    set_send_timeout(fd, std::chrono::milliseconds{0}); // the caller's sends: its own rules
    return fd;
  }
  int err = errno == EINPROGRESS || errno == EAGAIN ? ETIMEDOUT : errno;
  ::close(fd);
  errno = err;
  return -1;
}

} // namespace

int poll_timeout_ms(SteadyClock::time_point deadline) {
  auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - SteadyClock::now()).count();
  return static_cast<int>(std::clamp<long long>(left, 0, 1'000'000'000));
}

int connect_before(const ConnectTarget& target, SteadyClock::time_point deadline,
                   std::string& error) {
  const std::string& what =
      target.is_unix ? target.path_or_host : target.path_or_host + ":" + target.port;
  if (target.is_unix) {
    sockaddr_un sun{};
    sun.sun_family = AF_UNIX;
    if (target.path_or_host.size() >= sizeof sun.sun_path) {
      error = "connect(\"" + what + "\"): path too long";
      return -1;
    }
    std::memcpy(sun.sun_path, target.path_or_host.c_str(), target.path_or_host.size() + 1);
    int fd = try_connect(AF_UNIX, reinterpret_cast<sockaddr*>(&sun), sizeof sun, deadline);
    if (fd < 0) error = sys_error("connect", what);
    return fd;
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* list = nullptr;
  if (int rc = ::getaddrinfo(target.path_or_host.c_str(), target.port.c_str(), &hints, &list);
      rc != 0) {
    error = "connect(\"" + what + "\"): getaddrinfo: " + gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* ai = list; ai && fd < 0; ai = ai->ai_next)
    fd = try_connect(ai->ai_family, ai->ai_addr, ai->ai_addrlen, deadline);
  int err = errno;
  ::freeaddrinfo(list);
  if (fd < 0) error = sys_error("connect", what, err);
  return fd;
}

} // namespace fcgi_host
