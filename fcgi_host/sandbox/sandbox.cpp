#include "fcgi_host/sandbox/sandbox.hpp"

#include "fcgi_host/sandbox/sandbox_landlock.hpp"
#include "fcgi_host/sandbox/sandbox_seccomp.hpp"
#include "fcgi_host/sys_error.hpp"

#include <cerrno>
#include <dirent.h>
#include <fcntl.h>
#include <linux/capability.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace fcgi_host {
namespace {

bool has_seccomp() {
  return prctl(PR_GET_SECCOMP, 0, 0, 0, 0) >= 0 || errno != EINVAL;
}

std::string read_all(const char* path) {
  std::string text;
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return text;
  char buf[16384];
  for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;)
    text.append(buf, static_cast<std::size_t>(n));
  ::close(fd);
  return text;
}

// The effective, permitted and inheritable sets emptied, and the ambient set: a worker left as
// root by --user root keeps uid 0 without a capability.
bool clear_capabilities() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3] = {};
  prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0);
  return ::syscall(SYS_capset, &header, data) == 0;
}

// Threads of this process (/proc/self/task). Landlock confines the thread that asks and what it
// starts afterwards, not threads already running.
int thread_count() {
  DIR* tasks = ::opendir("/proc/self/task");
  if (!tasks) return 1;
  int n = 0;
  while (const dirent* e = ::readdir(tasks))
    if (e->d_name[0] != '.') ++n;
  ::closedir(tasks);
  return n;
}

// What TCP the workers may use: "TCP connect to ports 5432, 6379, bind none", or open.
std::string describe_network(const SandboxSettings& settings, int abi) {
  if (landlock_handled_net(abi) == 0) return "TCP open (Landlock ABI < 4)";
  auto ports = [](const std::vector<std::uint16_t>& list) {
    if (list.empty()) return std::string("none");
    std::string text = list.size() == 1 ? "port " : "ports ";
    for (std::size_t i = 0; i < list.size(); ++i)
      text += (i ? ", " : "") + std::to_string(list[i]);
    return text;
  };
  return "TCP connect to " + ports(settings.connect_ports) + ", bind " + ports(settings.bind_ports);
}

void note(std::string& list, const std::string& what) {
  list += (list.empty() ? "" : "; ") + what;
}

} // namespace

const char* to_string(SandboxMode mode) {
  switch (mode) {
  case SandboxMode::Off:
    return "off";
  case SandboxMode::On:
    return "on";
  case SandboxMode::BestEffort:
    return "best-effort";
  case SandboxMode::Log:
    return "log";
  }
  return "?";
}

std::string prepare_sandbox(const SandboxSettings& settings) {
  if (settings.private_tmp_fd >= 0) {
    // setns moves the working directory to the new namespace's root: back to the one the
    // master chose (--chdir), by descriptor, since under /tmp its path is hidden now.
    int cwd = ::open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
    bool joined = ::setns(settings.private_tmp_fd, CLONE_NEWNS) == 0;
    int err = errno;
    ::close(settings.private_tmp_fd);
    if (joined && cwd >= 0 && ::fchdir(cwd) != 0) err = errno, joined = false;
    if (cwd >= 0) ::close(cwd);
    if (!joined) return sys_error("setns", "--private-tmp mount namespace", err);
  }
  if (!settings.enabled()) return {};
  // The bounding set needs CAP_SETPCAP to shrink: a worker of a master that is not root has
  // no capability to lose (and no_new_privs keeps file capabilities from giving it any).
  if (prctl(PR_CAPBSET_READ, CAP_SETPCAP, 0, 0, 0) == 1 && geteuid() == 0)
    for (int cap = 0; prctl(PR_CAPBSET_READ, cap, 0, 0, 0) >= 0; ++cap)
      if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 && errno != EINVAL)
        return sys_error("prctl(PR_CAPBSET_DROP)", std::to_string(cap));
  return {};
}

SandboxResult enter_sandbox(const SandboxSettings& settings,
                            const std::vector<std::string>& programs) {
  SandboxResult result;
  if (!settings.enabled()) return result;
  const bool strict = settings.mode != SandboxMode::BestEffort;
  auto fail = [&](const std::string& why) {
    if (strict)
      note(result.error, why);
    else
      note(result.skipped, why);
  };
  if (!clear_capabilities()) fail(sys_error("capset", "empty sets"));
  if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0) {
    // Landlock and seccomp both need it: nothing more can be applied.
    fail(sys_error("prctl(PR_SET_NO_NEW_PRIVS)", "sandbox"));
    return result;
  }
  if (int abi = landlock_abi(); abi < 1) {
    fail("no Landlock in this kernel: files are not restricted");
  } else if (int threads = thread_count(); threads > 1) {
    fail(std::to_string(threads - 1) +
         " thread(s) started before the sandbox (by on_worker_start?) would escape Landlock, "
         "which confines only the thread that applies it: start them in on_thread_start or "
         "on the first request");
  } else {
    auto rules = landlock_rules(settings, mapped_files(read_all("/proc/self/maps")), programs);
    LandlockPorts ports{settings.connect_ports, settings.bind_ports};
    if (std::string why = apply_landlock(rules, ports, abi); !why.empty()) fail(why);
  }
  if (!result.error.empty()) return result;
  if (!has_seccomp()) {
    fail("no seccomp in this kernel: system calls are not filtered");
  } else {
    bool allow_exec = settings.allow_exec || !programs.empty();
    if (std::string why =
            apply_seccomp(seccomp_denials(allow_exec), settings.mode == SandboxMode::Log);
        !why.empty())
      fail(why);
  }
  return result;
}

std::string sandbox_unsupported(const SandboxSettings& settings) {
  std::string missing;
  if (settings.enabled() && landlock_abi() < 1)
    note(missing, "this kernel has no Landlock (landlock_create_ruleset: ABI 0)");
  if (settings.enabled() && !has_seccomp()) note(missing, "this kernel has no seccomp");
  if (settings.enabled() && landlock_handled_net(landlock_abi()) == 0 &&
      (!settings.connect_ports.empty() || !settings.bind_ports.empty()))
    note(missing, "--sandbox-connect and --sandbox-bind need Landlock ABI 4 (Linux 6.7); this "
                  "kernel has ABI " +
                      std::to_string(landlock_abi()));
  if (settings.private_tmp && geteuid() != 0)
    note(missing, "--private-tmp needs fcgi-host started as root (it mounts the pool's /tmp)");
  return missing;
}

std::string describe_sandbox(const SandboxSettings& settings) {
  std::string text = to_string(settings.mode);
  if (!settings.enabled()) return settings.private_tmp ? text + " (private /tmp)" : text;
  text += ": landlock ";
  int abi = landlock_abi();
  text += abi > 0 ? "ABI " + std::to_string(abi) : std::string("unavailable");
  text += landlock_scopes(abi) != 0
              ? ", signals and abstract sockets scoped"
              : ", signals and abstract sockets not scoped (Landlock ABI < 6)";
  const bool log_only = settings.mode == SandboxMode::Log;
  text += log_only ? ", seccomp deny-list logging only" : ", seccomp deny-list";
  text += settings.allow_exec ? " (exec allowed)" : log_only ? " (exec logged)" : " (exec refused)";
  text += ", no_new_privs, capabilities dropped";
  if (settings.private_tmp) text += ", private /tmp";
  text += "; read " + std::to_string(settings.read.size()) + ", write " +
          std::to_string(settings.write.size()) + " paths";
  return text + "; " + describe_network(settings, abi);
}

} // namespace fcgi_host
