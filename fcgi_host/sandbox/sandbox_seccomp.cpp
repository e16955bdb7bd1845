#include "fcgi_host/sandbox/sandbox_seccomp.hpp"

#include <cerrno>
#include <cstring>
#include <memory>
#include <sched.h>
#include <seccomp.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

namespace fcgi_host {
namespace {

constexpr unsigned long long kNamespaceFlags[] = {CLONE_NEWNS,  CLONE_NEWCGROUP, CLONE_NEWUTS,
                                                  CLONE_NEWIPC, CLONE_NEWUSER,   CLONE_NEWPID,
                                                  CLONE_NEWNET, CLONE_NEWTIME};

using Filter = std::unique_ptr<void, void (*)(scmp_filter_ctx)>;

std::string libseccomp_error(const char* call, std::string_view what, int rc) {
  return std::string(call) + "(\"" + std::string(what) + "\") failed: " + std::strerror(-rc);
}

// The filter, or null with `error` set.
Filter make_filter(const std::vector<SeccompDenial>& denials, bool log_only, std::string& error) {
  Filter ctx(seccomp_init(SCMP_ACT_ALLOW), seccomp_release);
  if (!ctx) {
    error = "seccomp_init failed";
    return Filter(nullptr, seccomp_release);
  }
  // A binary tree of the listed calls rather than a list compared in turn: a kernel without the
  // seccomp action cache (before 5.11) runs the program on every call, and read, sendto and
  // epoll_wait then take a handful of comparisons instead of one per listed call. Newer kernels
  // answer an allowed call that no rule's arguments decide from a bitmap, without the program.
  // An older libseccomp without the attribute builds the list: same verdicts.
  seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_OPTIMIZE, 2);
  for (const SeccompDenial& d : denials) {
    int nr = seccomp_syscall_resolve_name(std::string(d.name).c_str());
    if (nr == __NR_SCMP_ERROR) nr = d.number;
    if (nr < 0) continue; // not a call of this architecture
    std::uint32_t action = log_only ? SCMP_ACT_LOG : SCMP_ACT_ERRNO(d.error);
    int rc = 0;
    switch (d.when) {
    case SeccompDenial::When::Always:
      rc = seccomp_rule_add(ctx.get(), action, nr, 0);
      break;
    case SeccompDenial::When::OtherProcess:
      rc = seccomp_rule_add(ctx.get(), action, nr, 1,
                            SCMP_A0(SCMP_CMP_NE, static_cast<scmp_datum_t>(getpid())));
      break;
    case SeccompDenial::When::NotThisProcess:
      // libseccomp takes one comparison per argument and rule: "this process" is 0 only (what
      // the C library passes for getrlimit, setrlimit, nice); its own pid spelled out is refused.
      rc = seccomp_rule_add(ctx.get(), action, nr, 1, SCMP_A0(SCMP_CMP_NE, 0));
      break;
    case SeccompDenial::When::OtherPriority:
      // Two rules, either refuses: a `which` other than PRIO_PROCESS, or a `who` other than 0.
      rc = seccomp_rule_add(ctx.get(), action, nr, 1, SCMP_A0(SCMP_CMP_NE, PRIO_PROCESS));
      if (rc == 0) rc = seccomp_rule_add(ctx.get(), action, nr, 1, SCMP_A1(SCMP_CMP_NE, 0));
      break;
    case SeccompDenial::When::NamespaceFlags:
      // clone's flags are its first argument on x86 and arm. A rule per flag (rules of one
      // call are alternatives): the call is refused when any of them is set.
      for (unsigned long long flag : kNamespaceFlags)
        if (rc == 0)
          rc = seccomp_rule_add(ctx.get(), action, nr, 1, SCMP_A0(SCMP_CMP_MASKED_EQ, flag, flag));
      break;
    }
    if (rc != 0) {
      error = libseccomp_error("seccomp_rule_add", d.name, rc);
      return Filter(nullptr, seccomp_release);
    }
  }
  return ctx;
}

} // namespace

std::vector<SeccompDenial> seccomp_denials(bool allow_exec) {
  using W = SeccompDenial::When;
  std::vector<SeccompDenial> d = {
      {"ptrace"},
      {"process_vm_readv", W::OtherProcess},
      {"process_vm_writev", W::OtherProcess},
      // A sibling's or the master's limits and priority are not a handler's to change.
      {"prlimit64", W::NotThisProcess},
      {"setpriority", W::OtherPriority},
      {"mount"},
      {"umount2"},
      {"pivot_root"},
      {"chroot"},
      {"move_mount"},
      {"open_tree"},
      {"fsopen"},
      {"fsmount"},
      {"fsconfig"},
      {"fspick"},
      {"mount_setattr"},
      {"unshare"},
      {"setns"},
      {"clone", W::NamespaceFlags},
      {"clone3", W::Always, ENOSYS},
      {"init_module"},
      {"finit_module"},
      {"delete_module"},
      {"kexec_load"},
      {"kexec_file_load"},
      {"bpf"},
      {"perf_event_open"},
      {"add_key"},
      {"request_key"},
      {"keyctl"},
      {"userfaultfd"},
      {"reboot"},
      {"swapon"},
      {"swapoff"},
      {"acct"},
      // Metadata: a handler made its own plugin 0666 for another user to rewrite. Refused in
      // the write list too (the filter sees no path); a file gets its mode when it is made.
      {"chmod"},
      {"fchmod"},
      {"fchmodat"},
      {"fchmodat2", W::Always, 1, 452},
      {"chown"},
      {"fchown"},
      {"lchown"},
      {"fchownat"},
      {"utime"},
      {"utimes"},
      {"futimesat"},
      {"utimensat"},
      {"setxattr"},
      {"lsetxattr"},
      {"fsetxattr"},
      {"removexattr"},
      {"lremovexattr"},
      {"fremovexattr"},
      {"setxattrat", W::Always, 1, 463},
      {"removexattrat", W::Always, 1, 466},
      // Watching files the handler may not read (inotify needs no open, so Landlock never
      // sees it), and fanotify, which a worker never needs.
      {"inotify_add_watch"},
      {"fanotify_init"},
  };
  if (!allow_exec) {
    d.push_back({"execve"});
    d.push_back({"execveat"});
    // A file-less executable: written to a memfd, then run from /proc/self/fd.
    d.push_back({"memfd_create"});
  }
  return d;
}

std::string build_seccomp_filter(const std::vector<SeccompDenial>& denials, bool log_only,
                                 std::vector<unsigned char>& bpf) {
  std::string error;
  Filter ctx = make_filter(denials, log_only, error);
  if (!ctx) return error;
  int fd = memfd_create("seccomp-bpf", MFD_CLOEXEC);
  if (fd < 0) return std::string("memfd_create failed: ") + std::strerror(errno);
  int rc = seccomp_export_bpf(ctx.get(), fd);
  if (rc == 0) {
    off_t size = lseek(fd, 0, SEEK_END);
    bpf.resize(size > 0 ? static_cast<std::size_t>(size) : 0);
    if (pread(fd, bpf.data(), bpf.size(), 0) != static_cast<ssize_t>(bpf.size())) bpf.clear();
  }
  ::close(fd);
  return rc == 0 ? "" : libseccomp_error("seccomp_export_bpf", "sandbox", rc);
}

std::string apply_seccomp(const std::vector<SeccompDenial>& denials, bool log_only) {
  std::string error;
  Filter ctx = make_filter(denials, log_only, error);
  if (!ctx) return error;
  // Every thread of the worker (a handler thread made before the sandbox too).
  seccomp_attr_set(ctx.get(), SCMP_FLTATR_CTL_TSYNC, 1);
  int rc = seccomp_load(ctx.get());
  return rc == 0 ? "" : libseccomp_error("seccomp_load", "sandbox", rc);
}

} // namespace fcgi_host
