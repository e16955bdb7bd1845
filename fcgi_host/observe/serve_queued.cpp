#include "fcgi_host/observe/serve_queued.hpp"

#include "process_manager/clock.hpp"

#include <algorithm>
#include <cerrno>
#include <poll.h>
#include <unistd.h>

namespace fcgi_host {

void serve_queued(int listen_fd, QueuedBudget budget,
                  const std::function<void(int fd, const sockaddr_storage& peer,
                                           std::uint64_t deadline_ns)>& serve) {
  const std::uint64_t deadline =
      process_manager::monotonic_ns() + process_manager::ns(budget.total);
  for (int i = 0; i < budget.max_connections && process_manager::monotonic_ns() < deadline; ++i) {
    sockaddr_storage peer{};
    socklen_t len = sizeof peer;
    int c = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&peer), &len,
                      SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0) return; // EAGAIN: nothing more queued
    const std::uint64_t own =
        process_manager::monotonic_ns() + process_manager::ns(budget.per_connection);
    serve(c, peer, std::min(deadline, own));
    ::close(c);
  }
}

long read_before(int fd, char* buf, std::size_t size, std::uint64_t deadline_ns) {
  const std::uint64_t now = process_manager::monotonic_ns();
  if (now >= deadline_ns) return 0;
  pollfd p{fd, POLLIN, 0};
  if (::poll(&p, 1, static_cast<int>((deadline_ns - now) / 1'000'000 + 1)) <= 0) return 0;
  const ssize_t n = ::read(fd, buf, size);
  if (n > 0) return n;
  return n < 0 && (errno == EAGAIN || errno == EINTR) ? 0 : -1;
}

} // namespace fcgi_host
