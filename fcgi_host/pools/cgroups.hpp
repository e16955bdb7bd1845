#pragma once
// memory-max and cpu-weight: a cgroup v2 of each limited pool's own, made by the master of the
// pools the way systemd's delegation asks (Delegate=yes hands the service the subtree <cg> it
// runs in):
//   - cgroup v2 lets a cgroup that holds processes give no controller to its children ("no
//     internal processes"), so the master of the pools first moves itself (and its pools'
//     processes) into the leaf <cg>/supervisor, then enables +memory / +cpu in
//     <cg>/cgroup.subtree_control;
//   - each limited pool runs in <cg>/pool-NAME with memory.max and cpu.weight written there; its
//     master joins it before it execs, so its workers are born inside (and the OOM killer, at
//     memory-max, picks among them: process_manager/oom_watch.hpp names it in the exit line);
//   - a pool removed has its cgroup removed once empty.
// <cg> is found from /proc/self/cgroup and the cgroup2 mount in /proc/self/mountinfo (not always
// /sys/fs/cgroup). A pool without limits never touches cgroups.
#include "fcgi_host/pools/spec.hpp"

#include <map>
#include <set>
#include <string>
#include <sys/types.h>
#include <vector>

namespace fcgi_host {

// The name of a pool's cgroup: "pool-" + its name.
inline constexpr const char* kPoolCgroupPrefix = "pool-";

class PoolCgroups {
public:
  PoolCgroups() = default;
  PoolCgroups(const PoolCgroups&) = delete;
  PoolCgroups& operator=(const PoolCgroups&) = delete;
  ~PoolCgroups(); // removes the pools' cgroups that are empty

  // Throws PoolSpecError naming the pool, the option and why, for the first pool with limits
  // the cgroup cannot carry: no cgroup v2, not writable, the controller not available. (The
  // master's own processes count as the service's; at USR2, the new binary's --test-config
  // knows them by exec_env::kCheckedFor.)
  void check(const std::vector<PoolSpec>& pools) const;

  // The cgroup directory pool `pool` is to run in, made (with the supervisor leaf and the
  // controllers, the first time) and its limits written; empty for a pool without limits that
  // never had them (one that had them stays in its cgroup, at the kernel's defaults). Throws
  // StartupError naming the file and the call.
  std::string apply(const PoolSpec& pool);

  // Puts a running process into `dir` (a reload gave its pool limits): what it forks from now on
  // is born inside. Throws StartupError.
  static void move(pid_t pid, const std::string& dir);

  // An open fd of `dir`/cgroup.procs for a child to join with join(); throws StartupError.
  static int open_procs(const std::string& dir);
  // In a child, after fork: this process into the cgroup of `procs_fd`; false (errno set) if not.
  static bool join(int procs_fd);

  // After USR2, in the new image: the service's cgroup the old one had moved out of (empty:
  // none), with the controllers it enabled.
  void resume(const std::string& base);
  const std::string& base() const { return base_; }

  // A pool gone: its cgroup is removed now if empty, else by a later sweep().
  void remove(const std::string& pool);
  void sweep();

private:
  void prepare(const std::set<std::string>& controllers);
  void move_own_processes(const std::string& leaf) const;

  std::string base_;                        // the service's cgroup, once the master moved out
  std::set<std::string> enabled_;           // controllers enabled for the children of base_
  std::map<std::string, std::string> dirs_; // pool -> its cgroup
  std::vector<std::string> to_remove_;      // cgroups of removed pools, not yet empty
};

} // namespace fcgi_host
