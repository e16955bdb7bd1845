// cgroup v2 for the pools' memory-max and cpu-weight (the options: test_config.cpp): the texts the
// kernel writes (/proc/self/cgroup, /proc/self/mountinfo, memory.events) read as they come from a
// hybrid system (cgroup v1 beside a v2 mount at /sys/fs/cgroup/unified), a pure v2 one, and a
// cgroup namespace.
#include "process_manager/cgroup_v2.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace pm = process_manager;

namespace {

constexpr const char* kHybridCgroup = "9:name=systemd:/\n"
                                      "4:memory:/process_api/c4d08\n"
                                      "1:cpu:/\n"
                                      "0::/system.slice/fcgi-host.service\n";

constexpr const char* kHybridMountinfo =
    "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
    "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
    "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

} // namespace

TEST_SUITE("cgroup") {

  TEST_CASE("/proc/self/cgroup: the v2 line, beside v1 hierarchies or alone") {
    CHECK(*pm::parse_cgroup2_path(kHybridCgroup) == "/system.slice/fcgi-host.service");
    CHECK(*pm::parse_cgroup2_path("0::/\n") == "/");
    CHECK(*pm::parse_cgroup2_path("0::/user.slice/user-1000.slice/x.scope") ==
          "/user.slice/user-1000.slice/x.scope");
    CHECK_FALSE(pm::parse_cgroup2_path("4:memory:/a\n1:cpu:/\n"));
    CHECK_FALSE(pm::parse_cgroup2_path(""));
  }

  TEST_CASE("mountinfo: the cgroup2 mount, wherever it is, with its root") {
    auto hybrid = pm::parse_cgroup2_mount(kHybridMountinfo);
    REQUIRE(hybrid);
    CHECK(hybrid->mount_point == "/sys/fs/cgroup/unified");
    CHECK(hybrid->root == "/");
    // Pure v2, with optional fields before the separator.
    auto pure = pm::parse_cgroup2_mount("22 1 8:1 / / rw - ext4 /dev/sda1 rw\n"
                                        "27 22 0:23 / /sys/fs/cgroup rw,nosuid shared:9 master:2 - "
                                        "cgroup2 cgroup2 rw,nsdelegate\n");
    REQUIRE(pure);
    CHECK(pure->mount_point == "/sys/fs/cgroup");
    // An escaped space in the mount point; a namespace that shows a subtree only.
    auto odd = pm::parse_cgroup2_mount("40 1 0:38 /a\\040b /mnt/cg\\040v2 rw - cgroup2 none rw\n");
    REQUIRE(odd);
    CHECK(odd->root == "/a b");
    CHECK(odd->mount_point == "/mnt/cg v2");
    CHECK_FALSE(
        pm::parse_cgroup2_mount("35 31 0:32 / /sys/fs/cgroup/memory rw - cgroup cgroup rw\n"));
    CHECK_FALSE(pm::parse_cgroup2_mount("garbage\n\n- - -\n"));
  }

  TEST_CASE("the cgroup's directory: mount point plus the path under the mount's root") {
    pm::Cgroup2Mount unified{"/", "/sys/fs/cgroup/unified"};
    CHECK(*pm::cgroup_directory(unified, "/system.slice/x.service") ==
          "/sys/fs/cgroup/unified/system.slice/x.service");
    CHECK(*pm::cgroup_directory(unified, "/") == "/sys/fs/cgroup/unified");
    pm::Cgroup2Mount trailing{"/", "/sys/fs/cgroup/"};
    CHECK(*pm::cgroup_directory(trailing, "/a") == "/sys/fs/cgroup/a");
    pm::Cgroup2Mount nested{"/system.slice", "/sys/fs/cgroup"};
    CHECK(*pm::cgroup_directory(nested, "/system.slice/x.service") == "/sys/fs/cgroup/x.service");
    CHECK(*pm::cgroup_directory(nested, "/system.slice") == "/sys/fs/cgroup");
    CHECK_FALSE(pm::cgroup_directory(nested, "/user.slice/y.scope"));
    CHECK_FALSE(pm::cgroup_directory(nested, "/system.slicex/y"));
  }

  TEST_CASE(
      "memory.events: the oom_kill count, controllers as words, sizes as operators write them") {
    constexpr const char* events = "low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n";
    CHECK(*pm::parse_flat_key(events, "oom_kill") == 2);
    CHECK(*pm::parse_flat_key(events, "oom") == 3);
    CHECK_FALSE(pm::parse_flat_key(events, "oom_kil"));
    CHECK_FALSE(pm::parse_flat_key("oom_kill x\n", "oom_kill"));
    CHECK(pm::split_words("cpuset cpu io memory pids\n") ==
          std::vector<std::string>{"cpuset", "cpu", "io", "memory", "pids"});
    CHECK(pm::split_words("\n").empty());
    CHECK(pm::bytes_text(512ull << 20) == "512M");
    CHECK(pm::bytes_text(2ull << 30) == "2G");
    CHECK(pm::bytes_text(1536) == "1536");
    CHECK(pm::bytes_text(3ull << 10) == "3K");
    CHECK(pm::bytes_text(~0ull) == "max");
  }

  TEST_CASE("this process's cgroup is found where the kernel says it is") {
    std::string why;
    std::optional<std::string> dir = pm::own_cgroup_directory(why);
    if (!dir) {
      MESSAGE("no cgroup v2 here: " << why);
      CHECK_FALSE(why.empty());
      return;
    }
    CHECK(pm::read_text_file(*dir + "/cgroup.procs"));
  }
}
