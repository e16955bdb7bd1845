#include "fcgi_host/net/socket_write.hpp"

#include "fcgi_host/net/plain_syscalls.hpp"
#include "process_manager/clock.hpp"

#include <cerrno>
#include <climits>
#include <poll.h>
#include <sys/socket.h>

namespace fcgi_host {

namespace {

// Moves iov/count past `n` bytes written.
void advance(iovec*& iov, int& count, std::size_t n) {
  while (count > 0 && n >= iov->iov_len) {
    n -= iov->iov_len;
    ++iov;
    --count;
  }
  if (count > 0 && n > 0) {
    iov->iov_base = static_cast<char*>(iov->iov_base) + n;
    iov->iov_len -= n;
  }
}

// Waits until the socket takes more or the deadline passes; false with errno set.
bool wait_writable(int fd, std::uint64_t deadline_ns) {
  std::uint64_t now = process_manager::monotonic_ns();
  if (now >= deadline_ns) {
    errno = ETIMEDOUT;
    return false;
  }
  pollfd p{fd, POLLOUT, 0};
  int ready = ::poll(&p, 1, static_cast<int>((deadline_ns - now) / 1'000'000 + 1));
  return ready >= 0 || errno == EINTR;
}

} // namespace

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
    if (!wait_writable(fd, deadline_ns)) return false;
  }
}

long writev_some(int fd, iovec*& iov, int& count) {
  std::size_t done = 0;
  while (count > 0) {
    msghdr m{};
    m.msg_iov = iov;
    m.msg_iovlen = static_cast<std::size_t>(count < IOV_MAX ? count : IOV_MAX);
    ssize_t n = ::sendmsg(fd, &m, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<std::size_t>(n);
      advance(iov, count, static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    return -1;
  }
  return static_cast<long>(done);
}

bool writev_all_until(int fd, iovec* iov, int count, std::uint64_t deadline_ns) {
  for (;;) {
    if (writev_some(fd, iov, count) < 0) return false;
    if (count == 0) return true;
    if (!wait_writable(fd, deadline_ns)) return false;
  }
}

void append_iov(std::string& out, const iovec* iov, int count) {
  for (int i = 0; i < count; ++i)
    out.append(static_cast<const char*>(iov[i].iov_base), iov[i].iov_len);
}

bool write_all(int fd, const char* buf, std::size_t len, int timeout_ms) {
  return write_all_until(fd, buf, len,
                         process_manager::monotonic_ns() +
                             static_cast<std::uint64_t>(timeout_ms) * 1'000'000u);
}

} // namespace fcgi_host
