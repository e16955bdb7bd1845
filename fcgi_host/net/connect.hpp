#pragma once
// Connecting to a FastCGI server within a deadline, for the clients: the `status`/`ping`
// commands (cli/client_commands.cpp) and the raw test client (testing/). In the fcgi_protocol
// library, without libfcgi, as the test client needs.
#include <chrono>
#include <string>

namespace fcgi_host {

using SteadyClock = std::chrono::steady_clock;

// What to connect to: a Unix socket's path, or a host (a name or an address) and a port.
struct ConnectTarget {
  bool is_unix = false;
  std::string path_or_host;
  std::string port;
};

// Connects to each address of `target` in turn until one answers or `deadline` passes. Returns
// the connected socket (blocking, close-on-exec, no send timeout), or -1 with `error`
// naming the call and the target: `connect("/run/x.sock") failed: No such file or directory`.
int connect_before(const ConnectTarget& target, SteadyClock::time_point deadline,
                   std::string& error);

// The time left until `deadline` as poll()'s timeout: 0 once it has passed.
int poll_timeout_ms(SteadyClock::time_point deadline);

} // namespace fcgi_host
