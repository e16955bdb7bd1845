#include "fcgi_host/pools/member.hpp"

#include "fcgi_host/config/exec_env.hpp"
#include "fcgi_host/pools/cgroups.hpp"
#include "process_manager/log.hpp"
#include "process_manager/oom_watch.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <memory>
#include <sys/syscall.h>
#include <unistd.h>

namespace fcgi_host {
namespace {

using process_manager::LogLevel;

// A pidfd of `pid` (close-on-exec), or -1. The system call itself: glibc 2.36's <sys/pidfd.h>
// lacks extern "C" for C++.
int open_pidfd(pid_t pid) {
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}

} // namespace

std::string pool_status_address(const std::string& dir, const std::string& pool, pid_t pid) {
  return "unix:" + dir + "/" + pool + "-" + std::to_string(pid) + ".sock";
}

int join_pools_master(const std::string& pool, bool wants_cgroup, std::string& pidfile,
                      std::string& status_listen, process_manager::MasterOptions& options) {
  // A worker killed by the OOM killer in the pool's cgroup: said in its exit line, counted.
  auto oom = std::make_shared<process_manager::OomWatch>(kPoolCgroupPrefix + pool);
  options.oom_kill_note = [oom] { return oom->explain_sigkill(); };
  const char* master = std::getenv(exec_env::kPoolMaster);
  if (!master) {
    if (wants_cgroup)
      PM_LOG(LogLevel::Warn, "memory-max and cpu-weight are applied by the master of the pools; "
                             "this pool runs alone, without them");
    return -1;
  }
  pidfile.clear();
  const char* status_dir = std::getenv(exec_env::kPoolStatusDir);
  if (status_dir && *status_dir && status_listen.empty())
    status_listen = pool_status_address(status_dir, pool, ::getpid());
  const pid_t pid = static_cast<pid_t>(std::atol(master));
  if (pid <= 1) return -1;
  const int fd = open_pidfd(pid);
  if (fd < 0 && errno == ESRCH) leave_with_pools_master(); // gone already
  if (fd < 0) return -1; // a kernel without pidfds: PR_SET_PDEATHSIG only
  options.watch_fds.push_back(fd);
  return fd;
}

void leave_with_pools_master() {
  PM_LOG(LogLevel::Alert, "the master of the pools is gone; this pool's master stops at once");
  ::kill(::getpid(), SIGKILL);
  _exit(1);
}

} // namespace fcgi_host
