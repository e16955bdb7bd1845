#pragma once
// The Landlock part of the sandbox: which files a worker may read, write and execute once its
// handler is loaded, and the raw system calls that make the kernel enforce it (no liblandlock).
//
// The list (docs/security.md, "Sandbox"): every file the worker has mapped when the sandbox is
// applied (the executable, the plugin, every library, read from /proc/self/maps), the system
// files a web handler reads (kSystemReads: TLS certificates, name resolution, time zones,
// locales, random devices, /proc/self), --sandbox-read (read-only), --sandbox-write and the
// host's own logs and capture directory (read and write). Nothing else, for any user id.
#include "fcgi_host/sandbox/sandbox_settings.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fcgi_host {

struct LandlockRule {
  std::string path;
  bool write = false;
  bool execute = false;
  bool required = true; // a path the operator named: missing is an error, not skipped
  bool operator==(const LandlockRule&) const = default;
};

// The system files a worker may read, skipped when absent.
extern const std::vector<std::string_view> kSystemReads;
// An --exec program is not mapped yet when the rules are made, and a handler with
// --sandbox-exec on runs programs: they may read and execute /usr (the programs, their
// interpreter, libraries and data; /bin and /lib are links into it on Debian).
extern const std::vector<std::string_view> kExecProgramReads;

// The files of /proc/PID/maps text, each once, in order; pseudo entries ([heap], anonymous,
// "(deleted)" files) left out.
std::vector<std::string> mapped_files(std::string_view proc_maps);

// The ruleset of a worker: `mapped` (mapped_files of the worker), the system list, `programs`
// (an --exec program: read and execute), then the settings' lists. A path given twice keeps its
// widest access.
std::vector<LandlockRule> landlock_rules(const SandboxSettings& settings,
                                         const std::vector<std::string>& mapped,
                                         const std::vector<std::string>& programs);

// The Landlock ABI version of this kernel, 0 without Landlock. Probed once and remembered (the
// master probes at start; its workers inherit the answer). Test-only switch: the environment
// variable FCGI_HOST_TEST_LANDLOCK_ABI=N caps it at N (0 simulates a kernel without Landlock).
int landlock_abi();

// The access rights (LANDLOCK_ACCESS_FS_*) ABI `abi` handles: what the ruleset denies unless
// a rule allows it.
unsigned long long landlock_handled_access(int abi);

// What ABI `abi` keeps inside the worker's domain (LANDLOCK_SCOPE_*, ABI 6): signals to a
// process outside it (the master, the other workers: each worker is a domain of its own; its
// own children are inside) and connections to abstract Unix sockets bound outside it. 0
// before ABI 6. (The crash handler's SIGCHLD that wakes the master early is refused then: the
// master sees the crash at its next tick.)
unsigned long long landlock_scopes(int abi);

// The TCP rights ABI `abi` handles (LANDLOCK_ACCESS_NET_BIND_TCP, CONNECT_TCP; ABI 4): what
// the ruleset denies unless a port rule allows it. 0 before ABI 4: TCP stays open there.
unsigned long long landlock_handled_net(int abi);

// The TCP ports a worker may use: `connect` to, `bind` (the settings' lists).
struct LandlockPorts {
  std::vector<std::uint16_t> connect;
  std::vector<std::uint16_t> bind;
};

// Makes the kernel enforce `rules` and `ports` on this process (and what it execs) for good.
// Needs no_new_privs first. "" when done, else the failed call and its object.
std::string apply_landlock(const std::vector<LandlockRule>& rules, const LandlockPorts& ports,
                           int abi);

} // namespace fcgi_host
