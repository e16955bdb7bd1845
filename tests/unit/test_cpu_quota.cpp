// The default --workers follows the container: the CPU quota of the cgroup (v2 cpu.max, v1
// cpu.cfs_quota_us / cpu.cfs_period_us, rounded up, at least 1), then the affinity mask, then the
// cores. The files are laid out in a directory as the kernel shows them (a cgroup v1 container
// as podman makes it on this machine, a cgroup v2 pod, a hybrid system, no cgroup at all) and
// read through read_cpu_quota(root).
#include "process_manager/cpu_quota.hpp"
#include "support/files.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace pm = process_manager;
namespace fs = std::filesystem;

namespace {

// A temporary directory stands for "/": root.write("/proc/self/cgroup", ...) lays out the
// kernel's files, and the quota is read under it.
std::optional<pm::CpuQuota> quota(const test_support::TempDir& root) {
  return pm::read_cpu_quota(root.path());
}

// cgroup v1, as podman (cgroupfs, no cgroup namespace) shows a container its own cgroup: the
// path in /proc/self/cgroup is the host's, the mount's root is that same cgroup.
constexpr const char* kV1Cgroup = "9:name=systemd:/libpod_parent/libpod-ab12\n"
                                  "4:cpu,cpuacct:/libpod_parent/libpod-ab12\n"
                                  "0::/\n";
constexpr const char* kV1Mountinfo =
    "600 590 0:70 / /sys/fs/cgroup ro,nosuid - tmpfs tmpfs ro,mode=755\n"
    "605 600 0:31 /libpod_parent/libpod-ab12 /sys/fs/cgroup/cpu,cpuacct ro,nosuid master:12 - "
    "cgroup cgroup rw,cpu,cpuacct\n"
    "606 600 0:33 /libpod_parent/libpod-ab12 /sys/fs/cgroup/memory ro - cgroup cgroup rw,memory\n";

// cgroup v2 in a cgroup namespace (Kubernetes on a v2 node): the container sees "/".
constexpr const char* kV2Cgroup = "0::/\n";
constexpr const char* kV2Mountinfo =
    "700 690 0:28 / /sys/fs/cgroup ro,nosuid,nodev,noexec - cgroup2 cgroup2 rw,nsdelegate\n";

} // namespace

TEST_SUITE("cpu quota") {

  TEST_CASE("cpu.max: quota over period, max is no limit, garbage is none") {
    CHECK(*pm::parse_cpu_max("150000 100000\n") == doctest::Approx(1.5));
    CHECK(*pm::parse_cpu_max("200000 100000") == doctest::Approx(2.0));
    CHECK(*pm::parse_cpu_max("25000 100000\n") == doctest::Approx(0.25));
    CHECK_FALSE(pm::parse_cpu_max("max 100000\n"));
    CHECK_FALSE(pm::parse_cpu_max(""));
    CHECK_FALSE(pm::parse_cpu_max("150000"));
    CHECK_FALSE(pm::parse_cpu_max("0 100000"));
    CHECK_FALSE(pm::parse_cpu_max("15x 100000"));
    CHECK_FALSE(pm::parse_cpu_max("150000 100000 7"));
  }

  TEST_CASE("cfs_quota_us / cfs_period_us: -1 is no limit") {
    CHECK(*pm::parse_cfs_quota("100000\n", "100000\n") == doctest::Approx(1.0));
    CHECK(*pm::parse_cfs_quota("50000\n", "100000\n") == doctest::Approx(0.5));
    CHECK(*pm::parse_cfs_quota("350000", "100000") == doctest::Approx(3.5));
    CHECK_FALSE(pm::parse_cfs_quota("-1\n", "100000\n"));
    CHECK_FALSE(pm::parse_cfs_quota("100000\n", "0\n"));
    CHECK_FALSE(pm::parse_cfs_quota("", "100000"));
  }

  TEST_CASE("the v1 cpu hierarchy: its path and its mount, whatever else the controllers share") {
    CHECK(*pm::parse_cgroup1_path(kV1Cgroup, "cpu") == "/libpod_parent/libpod-ab12");
    CHECK(*pm::parse_cgroup1_path("1:cpu:/\n0::/x\n", "cpu") == "/");
    CHECK(*pm::parse_cgroup1_path("3:cpuacct,cpu:/a:b\n", "cpu") == "/a:b");
    CHECK_FALSE(pm::parse_cgroup1_path("2:cpuacct:/a\n3:cpuset:/\n0::/\n", "cpu"));
    auto m = pm::parse_cgroup1_mount(kV1Mountinfo, "cpu");
    REQUIRE(m);
    CHECK(m->mount_point == "/sys/fs/cgroup/cpu,cpuacct");
    CHECK(m->root == "/libpod_parent/libpod-ab12");
    CHECK_FALSE(pm::parse_cgroup1_mount(kV2Mountinfo, "cpu"));
    CHECK_FALSE(pm::parse_cgroup1_mount("35 31 0:32 / /sys/fs/cgroup/cpuacct rw - cgroup cgroup "
                                        "rw,cpuacct\n",
                                        "cpu"));
  }

  TEST_CASE("a v1 container with --cpus 1.5 reads 1.5 from cfs_quota_us") {
    test_support::TempDir root("cpu-quota");
    root.write("/proc/self/cgroup", kV1Cgroup);
    root.write("/proc/self/mountinfo", kV1Mountinfo);
    root.write("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "150000\n");
    root.write("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
    auto q = quota(root);
    REQUIRE(q);
    CHECK(q->cpus == doctest::Approx(1.5));
    CHECK(q->file.ends_with("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us"));
    // No limit: -1.
    root.write("/sys/fs/cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
    CHECK_FALSE(quota(root));
  }

  TEST_CASE("v1 without a namespace: the cgroup's own directory and the smallest of its parents") {
    test_support::TempDir root("cpu-quota");
    root.write("/proc/self/cgroup", "1:cpu:/kubepods/pod1/c2\n");
    root.write("/proc/self/mountinfo",
               "30 20 0:30 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n");
    root.write("/sys/fs/cgroup/cpu/kubepods/pod1/c2/cpu.cfs_quota_us", "-1\n");
    root.write("/sys/fs/cgroup/cpu/kubepods/pod1/c2/cpu.cfs_period_us", "100000\n");
    root.write("/sys/fs/cgroup/cpu/kubepods/pod1/cpu.cfs_quota_us", "250000\n");
    root.write("/sys/fs/cgroup/cpu/kubepods/pod1/cpu.cfs_period_us", "100000\n");
    root.write("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n");
    root.write("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
    auto q = quota(root);
    REQUIRE(q);
    CHECK(q->cpus == doctest::Approx(2.5));
    CHECK(q->file.ends_with("/kubepods/pod1/cpu.cfs_quota_us"));
  }

  TEST_CASE("a v2 pod: cpu.max, max is no limit") {
    test_support::TempDir root("cpu-quota");
    root.write("/proc/self/cgroup", kV2Cgroup);
    root.write("/proc/self/mountinfo", kV2Mountinfo);
    root.write("/sys/fs/cgroup/cpu.max", "50000 100000\n");
    auto q = quota(root);
    REQUIRE(q);
    CHECK(q->cpus == doctest::Approx(0.5));
    root.write("/sys/fs/cgroup/cpu.max", "max 100000\n");
    CHECK_FALSE(quota(root));
  }

  TEST_CASE("a hybrid system: the cpu controller is v1's, the v2 mount has none") {
    test_support::TempDir root("cpu-quota");
    root.write("/proc/self/cgroup", "1:cpu:/\n0::/user.slice\n");
    root.write("/proc/self/mountinfo",
               "30 20 0:30 / /sys/fs/cgroup/cpu rw - cgroup cgroup rw,cpu\n"
               "41 20 0:38 / /sys/fs/cgroup/unified rw - cgroup2 cgroup2 rw\n");
    root.write("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "-1\n");
    root.write("/sys/fs/cgroup/cpu/cpu.cfs_period_us", "100000\n");
    CHECK_FALSE(quota(root));
    root.write("/sys/fs/cgroup/cpu/cpu.cfs_quota_us", "300000\n");
    auto q = quota(root);
    REQUIRE(q);
    CHECK(q->cpus == doctest::Approx(3.0));
  }

  TEST_CASE("no cgroup at all: no quota") {
    test_support::TempDir root("cpu-quota");
    CHECK_FALSE(quota(root)); // no /proc/self files
    root.write("/proc/self/cgroup", "");
    root.write("/proc/self/mountinfo", "22 1 8:1 / / rw - ext4 /dev/vda rw\n");
    CHECK_FALSE(quota(root));
    // A v2 path but no cpu.max file (the cpu controller not enabled there).
    root.write("/proc/self/cgroup", kV2Cgroup);
    root.write("/proc/self/mountinfo", kV2Mountinfo);
    CHECK_FALSE(quota(root));
  }

  TEST_CASE("the choice: the quota rounded up, at least 1, then affinity, then the cores") {
    auto c = pm::choose_cpu_count(1.5, 8, 8);
    CHECK(c.count == 2);
    CHECK(c.why == "CPU quota 1.5");
    c = pm::choose_cpu_count(0.25, 8, 8);
    CHECK(c.count == 1);
    CHECK(c.why == "CPU quota 0.25");
    c = pm::choose_cpu_count(2.0, 64, 64);
    CHECK(c.count == 2);
    CHECK(c.why == "CPU quota 2");
    // A cpuset narrower than the quota: the affinity mask.
    c = pm::choose_cpu_count(4.0, 2, 8);
    CHECK(c.count == 2);
    CHECK(c.why == "CPU affinity: 2 of 8 CPUs");
    c = pm::choose_cpu_count(std::nullopt, 3, 8);
    CHECK(c.count == 3);
    CHECK(c.why == "CPU affinity: 3 of 8 CPUs");
    c = pm::choose_cpu_count(std::nullopt, 8, 8);
    CHECK(c.count == 8);
    CHECK(c.why == "8 CPUs");
    c = pm::choose_cpu_count(std::nullopt, 0, 4);
    CHECK(c.count == 4);
    CHECK(c.why == "4 CPUs");
    c = pm::choose_cpu_count(std::nullopt, 0, 0);
    CHECK(c.count == 1);
  }

  TEST_CASE("this process: a count of at least 1, and why") {
    auto c = pm::usable_cpu_count();
    CHECK(c.count >= 1);
    CHECK_FALSE(c.why.empty());
  }
}
