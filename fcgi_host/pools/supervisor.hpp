#pragma once
// The master of several pools. Each pool runs as a master of its own: this binary started with
// `--pool NAME` (so a pool has its own generations, scoreboard, crash backoff and breaker,
// boot-failure handling, limits and user, exactly as a single application has), and this process
// watches them:
//   - a pool whose master fails (a boot failure, a socket it cannot bind) stops alone, logged
//     once; the others go on. The last one to stop takes this master with it, with its exit code;
//   - a pool's master killed by a signal is started again (after a pause when it keeps dying
//     young);
//   - HUP reads every file again and acts on the pools that changed only: a new pool starts, a
//     removed one stops gracefully (its socket removed), a changed one reloads (HUP to its
//     master: a new generation, the old one kept if the new one is broken), one whose socket
//     settings changed restarts. A file that fails to parse refuses the whole reload;
//   - TERM, QUIT, INT and USR1 go to every pool's master; the pidfile is this master's;
//   - USR2 upgrades the binary: this master re-execs in place (same pid), then each pool's master
//     upgrades itself, and its new master is adopted (pools/upgrade.hpp).
#include "fcgi_host/cli/plan_pools.hpp"

#include <string>
#include <vector>

namespace fcgi_host {

// Runs the pools of `file` (parsed from `args`, `file.pools` listed) until they stop; returns the
// exit code. Pool masters are `executable` with pool_args(args, name).
int run_pools(const std::vector<std::string>& args, const Config& file,
              const ApplicationCheck& check, const std::string& executable);

// Set in a pool master's environment by the master of its pools, to its pid (pools/member.hpp).
inline constexpr const char* kPoolMasterEnv = "FCGI_HOST_POOL_MASTER";

} // namespace fcgi_host
