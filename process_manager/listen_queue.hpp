#pragma once
// How many connections wait in a listening socket's accept queue, and its backlog: on TCP from
// TCP_INFO (tcpi_unacked, tcpi_sacked), on Unix sockets from sock_diag (UNIX_DIAG_RQLEN, what
// `ss -lx` shows as Recv-Q and Send-Q). php-fpm and uWSGI report 0 for Unix sockets; the kernel
// has known the number all along.
#include <cstdint>

namespace process_manager {

struct ListenQueue {
  bool known = false;        // false: not a listening TCP or Unix socket, or the query failed
  std::uint32_t depth = 0;   // connections accepted by the kernel, not yet by a worker
  std::uint32_t backlog = 0; // the most it holds (listen()'s backlog, capped by somaxconn)
};

// A few system calls (one getsockopt on TCP; socket, send, recv, close of a netlink socket on
// Unix). For status pages and the master's sampling, never for the request path.
ListenQueue query_listen_queue(int listen_fd);

} // namespace process_manager
