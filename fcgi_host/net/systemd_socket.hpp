#pragma once
// systemd's socket activation (sd_listen_fds(3)), read in one place: the sockets systemd passed
// start at fd 3, LISTEN_FDS says how many, and they are this process's only when LISTEN_PID is
// its pid (a child that inherited the variables must not take them).
#include <sys/types.h>

namespace fcgi_host {

inline constexpr int kSystemdFirstFd = 3; // SD_LISTEN_FDS_START

// How many sockets systemd passed this process (0: none, or not to this process).
int systemd_socket_count();

// The variables removed, so that a child never takes the sockets for its own.
void forget_systemd_sockets();

// Before exec, in the process that execs: the one socket at fd 3 (left open across exec) is
// the new image's, as systemd would pass it.
void pass_systemd_socket();

} // namespace fcgi_host
