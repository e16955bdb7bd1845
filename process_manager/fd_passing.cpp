#include "process_manager/fd_passing.hpp"

#include <cerrno>
#include <cstring>
#include <sys/socket.h>

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

} // namespace process_manager
