#pragma once
// What the supervisor of the pools knows of a pool, and of itself: built by cli/plan_pools.cpp
// from the configuration. The supervisor never sees a Config: a pool's master reads its own
// options (it is this binary, started with `--pool NAME`).
#include "fcgi_host/net/listen_socket.hpp"
#include "fcgi_host/observe/metrics.hpp"

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

namespace fcgi_host {

// memory-max's "max": no limit, but a cgroup all the same.
inline constexpr unsigned long long kNoMemoryLimit = ~0ull;

struct PoolSpec {
  std::string name;
  std::vector<std::string> args; // its master's command line: the executable's, and --pool NAME
  std::string listen;            // its socket's address, as ListenAddress::to_string() writes it
  std::string status_listen;     // its own --status-listen; empty: one the supervisor gives it
  std::optional<unsigned long long> memory_max; // bytes, or kNoMemoryLimit
  std::optional<int> cpu_weight;
  std::string where_memory_max, where_cpu_weight; // "FILE:LINE: memory-max", for an error
  std::string sandbox; // its workers' sandbox, one line (--test-config shows it)
  // Every option its master takes, and the identity of the code it runs: when it changes, the
  // pool reloads.
  std::string settings;
  // What a reload cannot change in place (the socket, --exec or not): when it changes, the pool
  // restarts.
  std::string socket;

  bool wants_cgroup() const { return memory_max || cpu_weight; }
};

// A configuration the supervisor refuses (a pool its cgroup cannot carry): a usage error at
// start, a refused reload later.
class PoolSpecError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct SupervisorSpec {
  std::vector<std::string> args; // the command line (argv[0] first): USR2 runs it again
  std::string executable;        // the binary a pool's master and USR2 run
  std::string pidfile;           // empty: none
  // --status-listen before the first section: every pool's status page, and the control socket
  // of `fcgi-host reload POOL` and `scale POOL N`.
  std::optional<ListenOptions> status_listen;
  ObservabilitySettings observability;
  std::string ping_response;
  // Every file read again and every pool checked (a reload); throws saying why.
  std::function<std::vector<PoolSpec>()> read_pools;
};

} // namespace fcgi_host
