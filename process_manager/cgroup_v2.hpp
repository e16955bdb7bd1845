#pragma once
// cgroup v2, as systemd hands a service a subtree of its own (Delegate=yes): where this
// process's cgroup is, and what its files say. The parsers are pure (unit-tested on the texts
// the kernel writes); the readers read /proc and the cgroup files, and never write.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace process_manager {

// The cgroup v2 path in a /proc/PID/cgroup text: the "0::/path" line (a hybrid system lists the
// v1 hierarchies beside it). nullopt: no such line (a cgroup v1-only system).
std::optional<std::string> parse_cgroup2_path(std::string_view proc_cgroup);

struct Cgroup2Mount {
  std::string root; // the cgroup the mount shows at its top ("/" unless a namespace hides it)
  std::string mount_point; // where it is mounted: /sys/fs/cgroup, or /sys/fs/cgroup/unified on a
                           // hybrid system
};

// A field of /proc/PID/mountinfo as it is: the kernel escapes space, tab, newline and backslash
// as \ooo.
std::string unescape_mountinfo(std::string_view field);

// The first cgroup2 mount in a /proc/PID/mountinfo text (octal escapes as \040 decoded).
std::optional<Cgroup2Mount> parse_cgroup2_mount(std::string_view mountinfo);

// The directory of cgroup `path` under `mount`; nullopt when the mount does not show it.
std::optional<std::string> cgroup_directory(const Cgroup2Mount& mount, const std::string& path);

// The value of `key` in a flat-keyed cgroup file (memory.events: "oom_kill 3"); nullopt: absent.
std::optional<std::uint64_t> parse_flat_key(std::string_view text, std::string_view key);

// The words of a space-separated list (cgroup.controllers, cgroup.subtree_control).
std::vector<std::string> split_words(std::string_view text);

// Bytes as an operator writes them: 536870912 -> "512M", 1536 -> "1536", max -> "max".
std::string bytes_text(std::uint64_t bytes);

// A whole file, or nullopt when it cannot be read.
std::optional<std::string> read_text_file(const std::string& path);

// This process's cgroup directory (from /proc/self/cgroup and /proc/self/mountinfo), or nullopt
// with `why` set: no cgroup2 mount, no v2 path, or a cgroup the mount does not show.
std::optional<std::string> own_cgroup_directory(std::string& why);

} // namespace process_manager
