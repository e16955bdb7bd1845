#pragma once
// What a pool's sandbox is made of (--sandbox and the options beside it, docs/security.md,
// "Sandbox"). Plain data: cli/ fills it, the worker and the exec runner apply it.
#include <cstdint>
#include <string>
#include <vector>

namespace fcgi_host {

enum class SandboxMode {
  Off,        // nothing applied (the default)
  On,         // every layer, or the worker does not start (fail closed)
  BestEffort, // what the kernel has, and one line saying what it has not
  Log,        // as On, but the seccomp filter logs a listed call (kernel audit log) instead of
              // refusing it: to find which call a handler needs
};

struct SandboxSettings {
  SandboxMode mode = SandboxMode::Off;
  std::vector<std::string> read;  // --sandbox-read: read-only (files or directory trees)
  std::vector<std::string> write; // --sandbox-write: read and write
  bool allow_exec = false;        // --sandbox-exec on: execve and execveat stay allowed
  // --sandbox-connect HOST:PORT and --sandbox-bind PORT: the TCP ports a worker may connect to
  // and bind (Landlock ABI 4; its rules are per port, whatever the host). Nothing else.
  std::vector<std::uint16_t> connect_ports;
  std::vector<std::uint16_t> bind_ports;
  // --private-tmp: a /tmp of the pool's own (sandbox/private_tmp.hpp); independent of the mode.
  bool private_tmp = false;
  int private_tmp_fd = -1; // the pool's mount namespace, made by the master (-1: none)
  // Files the worker itself writes, made writable by the sandbox: the logs, the capture dir.
  std::vector<std::string> host_write;
  bool enabled() const { return mode != SandboxMode::Off; }
};

const char* to_string(SandboxMode mode);

} // namespace fcgi_host
