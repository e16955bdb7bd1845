#pragma once
// Descriptors sent with a message over a Unix socket (SCM_RIGHTS: the peer gets copies of its
// own). One form for every channel that passes them: the handoff channel (a kept connection to
// another worker), the log handover (reopened logs to a worker), the mold's channel (its plugin
// copy to the master).
#include <cstddef>
#include <span>
#include <sys/types.h>
#include <sys/uio.h>

namespace process_manager {

inline constexpr std::size_t kMaxPassedFds = 4;

// Sends `parts` as one message with `fds` attached (none: a plain message; more than
// kMaxPassedFds: refused), `flags` as sendmsg's (MSG_NOSIGNAL is always added). An interrupted
// send is retried; false on any other failure (errno says which).
bool send_with_fds(int socket, std::span<const iovec> parts, std::span<const int> fds, int flags);

struct ReceivedMessage {
  ssize_t length = -1;    // its bytes; 0: the peer is gone; -1: an error (errno)
  std::size_t fds = 0;    // the descriptors that came with it, kept in the caller's span
  bool truncated = false; // bytes or descriptors beyond what there was room for
};

// Receives one message into `data` (at most `size` bytes), `flags` as recvmsg's. The descriptors
// that came with it go to `fds` in order, close-on-exec (the entries not filled are -1); those
// beyond its room are closed, never leaked. An interrupted receive is retried.
ReceivedMessage receive_with_fds(int socket, void* data, std::size_t size, std::span<int> fds,
                                 int flags);

} // namespace process_manager
