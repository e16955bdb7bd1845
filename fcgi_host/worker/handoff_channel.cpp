#include "fcgi_host/worker/handoff_channel.hpp"

#include "fcgi_host/net/fd_flags.hpp"
#include "fcgi_host/sys_error.hpp"
#include "process_manager/fd_passing.hpp"

#include <cerrno>
#include <sys/socket.h>
#include <unistd.h>

namespace fcgi_host {

HandoffChannel make_handoff_channel() {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0)
    throw StartupError(sys_error("socketpair", "handoff channel"));
  // Messages carry up to kMaxHandoffBytes: room for a few hundred connections in flight.
  int size = 4 << 20;
  setsockopt(pair[0], SOL_SOCKET, SO_SNDBUF, &size, sizeof size);
  setsockopt(pair[1], SOL_SOCKET, SO_RCVBUF, &size, sizeof size);
  if (!set_nonblocking(pair[0], true) || !set_nonblocking(pair[1], true))
    throw StartupError(sys_error("fcntl(O_NONBLOCK)", "handoff channel"));
  return HandoffChannel{pair[0], pair[1]};
}

bool HandoffChannel::send(int fd, std::string_view buffered) const {
  if (buffered.size() > kMaxHandoffBytes) return false;
  char marker = 'C'; // a message is never empty, even with no bytes
  const iovec parts[2] = {{&marker, 1}, {const_cast<char*>(buffered.data()), buffered.size()}};
  return process_manager::send_with_fds(send_fd, {parts, buffered.empty() ? 1u : 2u}, {&fd, 1},
                                        MSG_DONTWAIT);
}

int HandoffChannel::receive(std::string& buffered) const {
  buffered.resize(kMaxHandoffBytes + 1);
  int fd = -1;
  const process_manager::ReceivedMessage got = process_manager::receive_with_fds(
      recv_fd, buffered.data(), buffered.size(), {&fd, 1}, MSG_DONTWAIT);
  const ssize_t n = got.length;
  if (n <= 0) {
    if (fd >= 0) ::close(fd);
    buffered.clear();
    return -1;
  }
  buffered.erase(0, 1); // the marker
  buffered.resize(static_cast<std::size_t>(n) - 1);
  if (fd < 0) return -1;
  // The fd shares its file description (and so O_NONBLOCK) with the sender's: it is already
  // non-blocking, as every accepted connection is.
  return fd;
}

std::size_t HandoffChannel::close_waiting() const {
  std::size_t closed = 0;
  std::string bytes;
  for (int fd; (fd = receive(bytes)) >= 0; ++closed)
    ::close(fd);
  return closed;
}

} // namespace fcgi_host
