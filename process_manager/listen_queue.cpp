#include "process_manager/listen_queue.hpp"

#include <cstring>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/unix_diag.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

namespace process_manager {

namespace {

constexpr int kTcpListen = 10; // TCP_LISTEN in the kernel's state numbering (also for AF_UNIX)

ListenQueue query_tcp(int fd) {
  ListenQueue q;
  tcp_info info{};
  socklen_t len = sizeof info;
  // On a listening socket the kernel reports sk_ack_backlog as tcpi_unacked and
  // sk_max_ack_backlog as tcpi_sacked.
  if (getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0 || info.tcpi_state != kTcpListen)
    return q;
  q.known = true;
  q.depth = info.tcpi_unacked;
  q.backlog = info.tcpi_sacked;
  return q;
}

ListenQueue query_unix(int fd) {
  ListenQueue q;
  struct stat st;
  if (fstat(fd, &st) != 0) return q;
  int nl = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
  if (nl < 0) return q;
  // The reply is queued before sendmsg returns; the timeout only guards against the unexpected.
  timeval tv{0, 200'000};
  setsockopt(nl, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);

  struct {
    nlmsghdr nlh;
    unix_diag_req req;
  } msg{};
  msg.nlh.nlmsg_len = sizeof msg;
  msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
  msg.nlh.nlmsg_flags = NLM_F_REQUEST; // one socket, by inode: no dump
  msg.nlh.nlmsg_seq = 1;
  msg.req.sdiag_family = AF_UNIX;
  msg.req.udiag_states = 1u << kTcpListen;
  msg.req.udiag_ino = static_cast<__u32>(st.st_ino);
  msg.req.udiag_show = UDIAG_SHOW_RQLEN;
  msg.req.udiag_cookie[0] = msg.req.udiag_cookie[1] = ~0u; // INET_DIAG_NOCOOKIE
  sockaddr_nl kernel{};
  kernel.nl_family = AF_NETLINK;
  if (sendto(nl, &msg, sizeof msg, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) < 0) {
    close(nl);
    return q;
  }
  alignas(nlmsghdr) char buf[4096];
  ssize_t n = recv(nl, buf, sizeof buf, 0);
  close(nl);
  if (n <= 0) return q;
  int left = static_cast<int>(n);
  for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
    if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY) return q; // NLMSG_ERROR: not found, no permission
    auto* m = static_cast<unix_diag_msg*>(NLMSG_DATA(h));
    if (m->udiag_ino != st.st_ino) continue;
    int attr_len = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(sizeof *m));
    for (auto* a = reinterpret_cast<rtattr*>(m + 1); RTA_OK(a, attr_len);
         a = RTA_NEXT(a, attr_len)) {
      if (a->rta_type != UNIX_DIAG_RQLEN) continue;
      unix_diag_rqlen rq;
      std::memcpy(&rq, RTA_DATA(a), sizeof rq);
      // For a listening socket: queued connections, and sk_max_ack_backlog.
      q.known = true;
      q.depth = rq.udiag_rqueue;
      q.backlog = rq.udiag_wqueue;
      return q;
    }
  }
  return q;
}

} // namespace

ListenQueue query_listen_queue(int listen_fd) {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (listen_fd < 0 || getsockname(listen_fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return {};
  if (addr.ss_family == AF_UNIX) return query_unix(listen_fd);
  if (addr.ss_family == AF_INET || addr.ss_family == AF_INET6) return query_tcp(listen_fd);
  return {};
}

} // namespace process_manager
