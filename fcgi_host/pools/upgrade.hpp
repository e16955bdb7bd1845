#pragma once
// USR2 to the master of the pools: every pool ends up served by the binary now on disk, without
// a failed request, and the master keeps its pid (systemd's MAINPID, the pidfile):
//   1. the new binary checks the configuration first (`NEW --config FILE --test-config`, a
//      process of its own): a binary that cannot run, or refuses the configuration, stops the
//      upgrade there with one line, and nothing has changed;
//   2. the master execs the new binary in place (same pid: its pools' masters stay its
//      children), handing over what it holds in exec_env::kPoolsHandover (below) and the locked
//      pidfile and its status socket (as a single master's upgrade does: the status socket
//      never closes, so `fcgi-host status`, `ping` and `reload` answer throughout);
//   3. the new image sends USR2 to each pool's master, which upgrades itself as a single master
//      does (its new master takes the socket, the old generation drains: no request lost); this
//      master is a child subreaper, so each pool's new master becomes its child when the old one
//      exits, and is adopted as the pool's master.
#include <chrono>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace fcgi_host {

// What the master of the pools hands to its new image across exec.
struct PoolsHandover {
  struct Pool {
    std::string name;
    pid_t pid = 0;
    char state = 'R';   // R running, S restarting (stopping for a new socket), X removed (stopping)
    std::string socket; // fingerprint() of its socket settings: a new image restarts the pool
                        // when its configuration changed them meanwhile
    bool operator==(const Pool&) const = default;
  };
  std::vector<Pool> pools; // the pools whose masters run
  std::string status_dir;  // the pools' own status sockets; empty: none
  std::string cgroup;      // the service's cgroup the master moved out of (pools/cgroups.hpp)
  bool operator==(const PoolsHandover&) const = default;

  // "status_dir=...;cgroup=...;pool=NAME:PID:STATE:SOCKET;..." (pool names are [A-Za-z0-9_-]; a
  // path holding ';' is refused by to_text: nullopt).
  std::optional<std::string> to_text() const;
  static std::optional<PoolsHandover> from_text(std::string_view text);
};

// A short, stable fingerprint of `text` (FNV-1a, 16 hex digits): the same in every build.
std::string fingerprint(std::string_view text);

// Runs `executable` with `args` (argv[0] first) and --test-config, bounded by `timeout`: empty
// when it exits 0, else why (its exit status and the last line it printed).
std::string check_new_binary(const std::string& executable, const std::vector<std::string>& args,
                             std::chrono::milliseconds timeout);

// What crosses exec besides the handover's text: the pidfile's locked fd, the status socket
// (-1 each: none; `status_file` its SocketFile::to_text(), empty for TCP) and systemd's socket
// (fd 3, when `systemd_socket`).
struct ExecFds {
  int pidfile = -1;
  int status = -1;
  std::string status_file;
  bool systemd_socket = false;
};

// Execs `executable` with `args` in place, with `handover` and `fds` left open across it.
// Returns only when the exec failed: why, with everything set for it undone.
std::string exec_in_place(const std::string& executable, const std::vector<std::string>& args,
                          const PoolsHandover& handover, const ExecFds& fds);

} // namespace fcgi_host
