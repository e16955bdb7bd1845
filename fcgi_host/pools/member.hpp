#pragma once
// What makes a `--pool NAME` master one of the master of the pools', set by that master in its
// environment (and left there, so that the new master after the pool's own USR2 finds it too):
//   FCGI_HOST_POOL_MASTER=PID (config/exec_env.hpp): the pidfile is that master's; and this master
//     dies with it. PR_SET_PDEATHSIG covers a master the master of the pools started; after a
//     USR2 the pool's new master was started by the old one, so a pidfd of the master of the
//     pools says when it is gone;
//   FCGI_HOST_POOL_STATUS_DIR=DIR: without a status-listen of its own, the pool's status socket
//     is DIR/NAME-PID.sock, which the master of the pools asks for its page (a name of each
//     master's own: after a USR2 the old one holds its socket until it exits).
// And a worker the OOM killer kills in the pool's cgroup is named in the exit line.
#include "process_manager/master.hpp"

#include <string>
#include <sys/types.h>

namespace fcgi_host {

// The status socket of pool `pool`'s master `pid` in `dir`.
std::string pool_status_address(const std::string& dir, const std::string& pool, pid_t pid);

// For the master of pool `pool` (`wants_cgroup`: it has memory-max or cpu-weight): sets
// `options`, and, started by the master of the pools, clears `pidfile` and sets `status_listen`
// as above. Returns the pidfd to watch (added to options.watch_fds; readable once the master of
// the pools is gone), or -1.
int join_pools_master(const std::string& pool, bool wants_cgroup, std::string& pidfile,
                      std::string& status_listen, process_manager::MasterOptions& options);

// The master of the pools is gone: this master goes at once, as PR_SET_PDEATHSIG would have it
// (its workers follow by theirs).
[[noreturn]] void leave_with_pools_master();

} // namespace fcgi_host
