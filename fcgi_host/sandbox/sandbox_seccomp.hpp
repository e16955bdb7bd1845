#pragma once
// The seccomp part of the sandbox: a deny-list of what a web handler never needs, built with
// libseccomp. A listed call fails with EPERM (the handler sees an error, the worker lives);
// everything else is allowed. With SandboxMode::Log the listed calls are allowed and logged by
// the kernel (SECCOMP_RET_LOG: the audit log, or dmesg), to find the call a handler needs.
#include "fcgi_host/sandbox/sandbox_settings.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace fcgi_host {

struct SeccompDenial {
  std::string_view name; // the system call
  // Refused only when...
  enum class When {
    Always,
    OtherProcess,   // its first argument (a pid) is not this process: process_vm_readv/writev
    NotThisProcess, // its first argument (a pid) is not 0, "this process": prlimit64
    OtherPriority,  // setpriority of anything but this process (PRIO_PROCESS, 0): a process
                    // group or a user is every worker, and the master
    NamespaceFlags, // clone with any CLONE_NEW* flag
  } when = When::Always;
  int error = 1; // EPERM; clone3 gets ENOSYS (its flags are out of a filter's reach: the C
                 // library falls back to clone, which is filtered)
  // The call's number where the installed libseccomp does not know its name (a call newer
  // than it: fchmodat2, setxattrat); the same on every architecture (the common table, 424+).
  int number = -1;
};

// The deny-list: ptrace, other processes' memory, limits and priorities, mount and namespace
// calls, modules, kexec, bpf, perf_event_open, the keyring, userfaultfd, reboot, swap, acct;
// files' metadata (modes, owners, times, extended attributes: Landlock has no right for them,
// and a filter cannot see the path, so they are refused everywhere) and inotify watches;
// execve, execveat and memfd_create (an executable without a file) unless `allow_exec`.
std::vector<SeccompDenial> seccomp_denials(bool allow_exec);

// The filter as a BPF program (for the unit tests: built, not loaded). "" on success.
std::string build_seccomp_filter(const std::vector<SeccompDenial>& denials, bool log_only,
                                 std::vector<unsigned char>& bpf);

// Loads the filter into this process (and its future threads and children). Needs
// no_new_privs. "" when done, else why.
std::string apply_seccomp(const std::vector<SeccompDenial>& denials, bool log_only);

} // namespace fcgi_host
