#pragma once
// USR2, what crosses exec from the old master to the new one: the listen socket, the ready pipe,
// the handoff channel, the locked pidfile, the status socket and the health port (fds left open
// across exec),
// and the socket files' DEV:INODE, each named by an environment variable (config/exec_env.hpp). The
// old master's child sets them right before it execs the binary (export_handover()); the new master
// takes them back at start (take_handover(), take_handoff_channel()), checking each fd, making it
// close-on-exec again and removing its variable, so that neither its workers nor a later upgrade
// see a stale one. process_manager/binary_upgrade.hpp is the other half: the fork and the ready
// byte.
#include "fcgi_host/net/socket_file.hpp"
#include "fcgi_host/worker/handoff_channel.hpp"

#include <string>
#include <vector>

namespace fcgi_host {

struct UpgradeHandover {
  int listen_fd = -1;     // take this socket, do not bind
  int ready_fd = -1;      // write one byte here when ready
  int pidfile_fd = -1;    // the locked pidfile, taken over
  SocketFile socket_file; // the path the old master bound: removed at the stop only if still it
  HandoffChannel handoff; // the old generation's kept connections move to the new workers
  int status_fd = -1;     // --status-listen's socket: take it, do not bind
  SocketFile status_file; // its path, removed at the stop only if still it
  int health_fd = -1;     // --health-listen's socket, likewise
  SocketFile health_file;
};

// The old master's child, just before exec: the fds lose close-on-exec and are named in the
// environment. A handoff channel or pidfile fd that cannot be kept is left out (the new master
// makes its own). False when the listen socket cannot be kept: there is nothing to exec for.
bool export_handover(const UpgradeHandover& h);

// The new master, at start: the listen socket, ready pipe, pidfile and status socket an old
// master handed over (-1 each when not started by an upgrade), and the socket files, read for
// `socket_path`, `status_path` and `health_path` only when their socket came with them.
UpgradeHandover take_handover(const std::string& socket_path, const std::string& status_path,
                              const std::string& health_path);
// The handoff channel an old master handed over (disabled when none).
HandoffChannel take_handoff_channel();

// What the master was handed on purpose, beside 0, 1 and 2: systemd's sockets, and an old
// master's fds at a binary upgrade. Everything else it inherited is a stray and is closed
// (process_manager/inherited_fds.hpp). Reads the environment, takes nothing from it.
std::vector<int> inherited_fds_to_keep();

// The path to exec on USR2: the file at the path we were started from, which a package upgrade
// has replaced (/proc/self/exe itself would name the old, deleted inode).
std::string own_executable();

} // namespace fcgi_host
