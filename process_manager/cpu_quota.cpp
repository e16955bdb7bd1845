#include "process_manager/cpu_quota.hpp"

#include "process_manager/cgroup_v2.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <sched.h>
#include <thread>
#include <vector>

namespace process_manager {
namespace {

// A whole positive decimal number, white space around it allowed (the files end in '\n').
std::optional<double> positive_number(std::string_view text) {
  const std::vector<std::string> words = split_words(text);
  if (words.size() != 1) return std::nullopt;
  long long n = 0;
  const std::string& w = words[0];
  auto [end, err] = std::from_chars(w.data(), w.data() + w.size(), n);
  if (err != std::errc() || end != w.data() + w.size() || n <= 0) return std::nullopt;
  return static_cast<double>(n);
}

std::vector<std::string> split_at(std::string_view text, char separator) {
  std::vector<std::string> out;
  for (;;) {
    const std::size_t at = text.find(separator);
    out.emplace_back(text.substr(0, at));
    if (at == std::string_view::npos) return out;
    text.remove_prefix(at + 1);
  }
}

bool has_word(const std::vector<std::string>& words, std::string_view word) {
  for (const std::string& w : words)
    if (w == word) return true;
  return false;
}

// 1.5 -> "1.5", 2.0 -> "2", 0.333 -> "0.33".
std::string cpus_text(double cpus) {
  char text[32];
  std::snprintf(text, sizeof text, "%.2f", cpus);
  std::string s = text;
  while (s.back() == '0')
    s.pop_back();
  if (s.back() == '.') s.pop_back();
  return s;
}

// The quota of one cgroup directory, read by `quota_of`, and of each ancestor up to the top the
// mount shows; the smallest wins.
template <typename QuotaOf>
std::optional<CpuQuota> smallest_up_to(std::string dir, const std::string& top, QuotaOf quota_of) {
  std::optional<CpuQuota> smallest;
  for (;;) {
    if (std::optional<CpuQuota> q = quota_of(dir); q && (!smallest || q->cpus < smallest->cpus))
      smallest = q;
    if (dir.size() <= top.size()) return smallest;
    dir.resize(dir.rfind('/'));
    if (dir.size() < top.size()) return smallest;
  }
}

} // namespace

std::optional<double> parse_cpu_max(std::string_view text) {
  const std::vector<std::string> words = split_words(text);
  if (words.size() != 2) return std::nullopt;
  const std::optional<double> quota = positive_number(words[0]); // "max": none
  const std::optional<double> period = positive_number(words[1]);
  if (!quota || !period) return std::nullopt;
  return *quota / *period;
}

std::optional<double> parse_cfs_quota(std::string_view quota, std::string_view period) {
  const std::optional<double> q = positive_number(quota); // -1: none
  const std::optional<double> p = positive_number(period);
  if (!q || !p) return std::nullopt;
  return *q / *p;
}

std::optional<std::string> parse_cgroup1_path(std::string_view proc_cgroup,
                                              std::string_view controller) {
  for (const std::string& line : split_at(proc_cgroup, '\n')) {
    // ID:CONTROLLERS:PATH; the path may hold ':' itself.
    const std::size_t first = line.find(':');
    const std::size_t second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) continue;
    if (has_word(split_at(std::string_view(line).substr(first + 1, second - first - 1), ','),
                 controller))
      return line.substr(second + 1);
  }
  return std::nullopt;
}

std::optional<CgroupMount> parse_cgroup1_mount(std::string_view mountinfo,
                                               std::string_view controller) {
  // ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS
  for (const std::string& line : split_at(mountinfo, '\n')) {
    const std::vector<std::string> f = split_words(line);
    std::size_t dash = 6;
    while (dash < f.size() && f[dash] != "-")
      ++dash;
    if (f.size() < 5 || dash + 3 >= f.size() || f[dash + 1] != "cgroup") continue;
    if (!has_word(split_at(f[dash + 3], ','), controller)) continue;
    return CgroupMount{unescape_mountinfo(f[3]), unescape_mountinfo(f[4])};
  }
  return std::nullopt;
}

std::optional<CpuQuota> read_cpu_quota(const std::string& root) {
  const std::optional<std::string> cgroup = read_text_file(root + "/proc/self/cgroup");
  const std::optional<std::string> mountinfo = read_text_file(root + "/proc/self/mountinfo");
  if (!cgroup || !mountinfo) return std::nullopt;
  // Where the cgroup's directory is: the mount point plus the path under the mount's root.
  auto directory = [&](const std::string& mount_root, const std::string& mount_point,
                       const std::string& path) {
    return cgroup_directory({mount_root, root + mount_point}, path);
  };
  const std::optional<CgroupMount> v1 = parse_cgroup1_mount(*mountinfo, "cpu");
  const std::optional<std::string> v1_path = parse_cgroup1_path(*cgroup, "cpu");
  if (v1 && v1_path) { // cgroup v1 or a hybrid system: the cpu controller is on v1
    const std::optional<std::string> dir = directory(v1->root, v1->mount_point, *v1_path);
    if (!dir) return std::nullopt;
    return smallest_up_to(*dir, root + v1->mount_point, [](const std::string& d) {
      const std::optional<std::string> quota = read_text_file(d + "/cpu.cfs_quota_us");
      const std::optional<std::string> period = read_text_file(d + "/cpu.cfs_period_us");
      std::optional<double> cpus =
          quota && period ? parse_cfs_quota(*quota, *period) : std::nullopt;
      return cpus ? std::optional<CpuQuota>({*cpus, d + "/cpu.cfs_quota_us"}) : std::nullopt;
    });
  }
  const std::optional<Cgroup2Mount> v2 = parse_cgroup2_mount(*mountinfo);
  const std::optional<std::string> v2_path = parse_cgroup2_path(*cgroup);
  if (!v2 || !v2_path) return std::nullopt;
  const std::optional<std::string> dir = directory(v2->root, v2->mount_point, *v2_path);
  if (!dir) return std::nullopt;
  return smallest_up_to(*dir, root + v2->mount_point, [](const std::string& d) {
    const std::optional<std::string> max = read_text_file(d + "/cpu.max");
    std::optional<double> cpus = max ? parse_cpu_max(*max) : std::nullopt;
    return cpus ? std::optional<CpuQuota>({*cpus, d + "/cpu.max"}) : std::nullopt;
  });
}

CpuCount choose_cpu_count(std::optional<double> quota, int affinity_cpus, int cores) {
  if (quota && *quota > 0) {
    const int rounded_up = std::max(1, static_cast<int>(std::ceil(*quota - 1e-9)));
    if (affinity_cpus <= 0 || rounded_up <= affinity_cpus)
      return {rounded_up, "CPU quota " + cpus_text(*quota)};
  }
  if (affinity_cpus > 0 && (cores <= 0 || affinity_cpus < cores))
    return {affinity_cpus, "CPU affinity: " + std::to_string(affinity_cpus) + " of " +
                               (cores > 0 ? std::to_string(cores) : std::string("?")) + " CPUs"};
  if (affinity_cpus > 0) return {affinity_cpus, std::to_string(affinity_cpus) + " CPUs"};
  if (cores > 0) return {cores, std::to_string(cores) + " CPUs"};
  return {1, "the number of CPUs is unknown"};
}

CpuCount usable_cpu_count() {
  cpu_set_t set;
  CPU_ZERO(&set);
  const int affinity = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : 0;
  const std::optional<CpuQuota> quota = read_cpu_quota();
  return choose_cpu_count(quota ? std::optional<double>(quota->cpus) : std::nullopt, affinity,
                          static_cast<int>(std::thread::hardware_concurrency()));
}

} // namespace process_manager
