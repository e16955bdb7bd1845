#pragma once
// How many CPUs this process may use, as a container runtime limits it: the CFS quota of its cgroup
// (cgroup v2 `cpu.max`; cgroup v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`), then the affinity
// mask (a cpuset), then the machine's cores. The number of cores alone is the node's, not the
// pod's: a pod limited to 1 CPU on a 64-core node would start 64 workers.
// The parsers and the choice are pure (unit-tested on the texts the kernel writes); the reader
// reads /proc and the cgroup files under a root that tests point at a directory of their own.
#include <optional>
#include <string>
#include <string_view>

namespace process_manager {

// cgroup v2 `cpu.max`: "150000 100000" -> 1.5 CPUs; "max 100000" (no limit) or anything else that
// is not two positive numbers -> nullopt.
std::optional<double> parse_cpu_max(std::string_view text);

// cgroup v1 `cpu.cfs_quota_us` and `cpu.cfs_period_us`: "150000", "100000" -> 1.5 CPUs; a quota of
// -1 (no limit) or a text that is not a positive number -> nullopt.
std::optional<double> parse_cfs_quota(std::string_view quota, std::string_view period);

// The path of the cgroup v1 hierarchy that has `controller`, in a /proc/PID/cgroup text:
// "4:cpu,cpuacct:/kubepods/pod1/c2" -> "/kubepods/pod1/c2". nullopt: no such hierarchy.
std::optional<std::string> parse_cgroup1_path(std::string_view proc_cgroup,
                                              std::string_view controller);

struct CgroupMount {
  std::string root; // the cgroup the mount shows at its top ("/" unless a namespace hides it)
  std::string mount_point; // where it is mounted
};

// The cgroup v1 mount of `controller` in a /proc/PID/mountinfo text (fstype "cgroup", the
// controller among its super options: "rw,cpu,cpuacct").
std::optional<CgroupMount> parse_cgroup1_mount(std::string_view mountinfo,
                                               std::string_view controller);

struct CpuQuota {
  double cpus = 0;  // 1.5
  std::string file; // the file that said so, for the log
};

// The smallest CPU quota on this process's cgroup and on its ancestors that the mount shows (a
// pod's limit may sit on the pod's cgroup, above the container's): cgroup v1's cpu hierarchy when
// it is mounted, else cgroup v2's cpu.max. nullopt: no quota, or no cgroup at all. `root` is put
// before every path read (/proc/self/..., the mount points): "" on a live system.
std::optional<CpuQuota> read_cpu_quota(const std::string& root = "");

// The default number of workers, and why: the quota rounded up (at least 1) unless the affinity
// mask allows fewer CPUs, then the affinity mask, then the cores (0: unknown).
struct CpuCount {
  int count = 1;
  std::string why; // "CPU quota 1.5", "CPU affinity: 3 of 8 CPUs", "8 CPUs"
};
CpuCount choose_cpu_count(std::optional<double> quota, int affinity_cpus, int cores);

// choose_cpu_count() on this process: read_cpu_quota(), sched_getaffinity(), the online cores.
CpuCount usable_cpu_count();

} // namespace process_manager
