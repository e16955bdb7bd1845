#include "fcgi_host/net/socket_write.hpp"

#include "fcgi_host/net/plain_syscalls.hpp"
#include "process_manager/clock.hpp"

#include <cerrno>
#include <poll.h>
#include <sys/socket.h>

namespace fcgi_host {

long write_some(int fd, const char* buf, std::size_t len) {
  std::size_t done = 0;
  while (done < len) {
    ssize_t n = plain::send(fd, buf + done, len - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return -1;
  }
  return static_cast<long>(done);
}

bool write_all_until(int fd, const char* buf, std::size_t len, std::uint64_t deadline_ns) {
  for (;;) {
    long n = write_some(fd, buf, len);
    if (n < 0) return false;
    buf += n;
    len -= static_cast<std::size_t>(n);
    if (len == 0) return true;
    std::uint64_t now = process_manager::monotonic_ns();
    if (now >= deadline_ns) {
      errno = ETIMEDOUT;
      return false;
    }
    pollfd p{fd, POLLOUT, 0};
    int ready = ::poll(&p, 1, static_cast<int>((deadline_ns - now) / 1'000'000 + 1));
    if (ready < 0 && errno != EINTR) return false;
  }
}

bool write_all(int fd, const char* buf, std::size_t len, int timeout_ms) {
  return write_all_until(fd, buf, len,
                         process_manager::monotonic_ns() +
                             static_cast<std::uint64_t>(timeout_ms) * 1'000'000u);
}

} // namespace fcgi_host
