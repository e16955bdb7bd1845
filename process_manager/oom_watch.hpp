#pragma once
// Was it the OOM killer? A worker that dies of a SIGKILL its master did not send was killed by
// the kernel's OOM killer or by another process, and the exit status cannot tell which. Where the
// master runs in a cgroup of its pool's own with a memory limit (memory-max), that cgroup's
// memory.events counts the OOM kills in it: a count that rose since it was last read says so.
//
// The cgroup is looked up again at each question (only after such a death: rare), since the
// master of the pools may move a running pool's master into a new cgroup at a reload (that
// cgroup is new, so its count starts at 0).
#include <cstdint>
#include <string>

namespace process_manager {

class OomWatch {
public:
  // `cgroup_name`: the name of the pool's own cgroup ("pool-api"); a master in a cgroup of any
  // other name has no limit of its own, and its deaths are never explained.
  explicit OomWatch(std::string cgroup_name);

  // After a death by a SIGKILL the master did not send: "killed by the OOM killer (memory-max
  // 512M)" when the cgroup's oom_kill count rose since it was last read, else empty.
  std::string explain_sigkill();

private:
  // The master's cgroup directory when it is the pool's own, else empty.
  std::string pool_cgroup() const;

  std::string name_;
  std::string dir_; // where `seen_` was read
  std::uint64_t seen_ = 0;
};

} // namespace process_manager
