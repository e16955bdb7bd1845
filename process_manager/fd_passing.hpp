#pragma once
// Descriptors sent with a message over a Unix socket (SCM_RIGHTS: the peer gets copies of its
// own). One form for every channel that passes them: the handoff channel (a kept connection to
// another worker), the log handover (reopened logs to a worker), the mold's channel (its plugin
// copy to the master).
#include <cstddef>
#include <span>
#include <sys/uio.h>

namespace process_manager {

inline constexpr std::size_t kMaxPassedFds = 4;

// Sends `parts` as one message with `fds` attached (none: a plain message; more than
// kMaxPassedFds: refused), `flags` as sendmsg's (MSG_NOSIGNAL is always added). An interrupted
// send is retried; false on any other failure (errno says which).
bool send_with_fds(int socket, std::span<const iovec> parts, std::span<const int> fds, int flags);

} // namespace process_manager
