#pragma once
// The master of several pools. Each pool runs as a master of its own: this binary started with
// `--pool NAME` (so a pool has its own generations, scoreboard, crash backoff and breaker,
// boot-failure handling, limits and user, exactly as a single application has), and this process
// watches them:
//   - a pool whose master fails (a boot failure, a socket it cannot bind) stops alone, logged
//     once; the others go on. The last one to stop takes this master with it, with its exit code;
//   - a pool's master killed by a signal is started again, with the master's crash policy
//     (process_manager/backoff.hpp): a pause when it keeps dying young, given up after 6;
//   - HUP reads every file again and acts on the pools that changed only: a new pool starts, a
//     removed one stops gracefully (its socket removed), a changed one reloads (HUP to its
//     master: a new generation, the old one kept if the new one is broken), one whose socket
//     settings changed restarts. A file that fails to parse refuses the whole reload;
//   - TERM, QUIT, INT and USR1 go to every pool's master; the pidfile is this master's;
//   - USR2 upgrades the binary: this master re-execs in place (same pid), then each pool's master
//     upgrades itself, and its new master is adopted (pools/upgrade.hpp).
#include "fcgi_host/pools/spec.hpp"

#include <vector>

namespace fcgi_host {

// Runs `pools` until they stop; returns the exit code. Throws PoolSpecError for a pool its
// cgroup cannot carry, StartupError for what cannot be opened (the pidfile, the status socket).
int run_pools(SupervisorSpec spec, std::vector<PoolSpec> pools);

} // namespace fcgi_host
