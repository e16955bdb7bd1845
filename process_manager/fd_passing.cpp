#include "process_manager/fd_passing.hpp"

#include <cerrno>
#include <cstring>
#include <sys/socket.h>
#include <unistd.h>

namespace process_manager {

bool send_with_fds(int socket, std::span<const iovec> parts, std::span<const int> fds, int flags) {
  if (fds.size() > kMaxPassedFds) {
    errno = EINVAL;
    return false;
  }
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)]{};
  msghdr msg{};
  msg.msg_iov = const_cast<iovec*>(parts.data()); // sendmsg only reads them
  msg.msg_iovlen = parts.size();
  if (!fds.empty()) {
    msg.msg_control = control;
    msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
    std::memcpy(CMSG_DATA(cmsg), fds.data(), sizeof(int) * fds.size());
  }
  for (;;) {
    if (::sendmsg(socket, &msg, flags | MSG_NOSIGNAL) >= 0) return true;
    if (errno != EINTR) return false;
  }
}

ReceivedMessage receive_with_fds(int socket, void* data, std::size_t size, std::span<int> fds,
                                 int flags) {
  for (int& fd : fds)
    fd = -1;
  iovec part{data, size};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxPassedFds)]{};
  msghdr msg{};
  msg.msg_iov = &part;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  ReceivedMessage got;
  do
    got.length = ::recvmsg(socket, &msg, flags | MSG_CMSG_CLOEXEC);
  while (got.length < 0 && errno == EINTR);
  if (got.length < 0) return got;
  got.truncated = (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0;
  for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
    if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
    const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
    for (std::size_t i = 0; i < count; ++i) {
      int fd;
      std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
      if (got.fds < fds.size()) {
        fds[got.fds++] = fd;
      } else {
        ::close(fd);
        got.truncated = true;
      }
    }
  }
  return got;
}

} // namespace process_manager
