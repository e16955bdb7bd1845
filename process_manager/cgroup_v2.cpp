#include "process_manager/cgroup_v2.hpp"

#include <charconv>
#include <fstream>
#include <iterator>
#include <sstream>

namespace process_manager {

std::string unescape_mountinfo(std::string_view field) {
  std::string out;
  for (std::size_t i = 0; i < field.size(); ++i) {
    if (field[i] == '\\' && i + 3 < field.size()) {
      const std::string_view oct = field.substr(i + 1, 3);
      if (oct.find_first_not_of("01234567") == std::string_view::npos) {
        out += static_cast<char>((oct[0] - '0') * 64 + (oct[1] - '0') * 8 + (oct[2] - '0'));
        i += 3;
        continue;
      }
    }
    out += field[i];
  }
  return out;
}

namespace {

// The words of `line`, split at any white space.
std::vector<std::string_view> fields(std::string_view line) {
  constexpr std::string_view kSpace = " \t\r\n";
  std::vector<std::string_view> out;
  std::size_t at = 0;
  while (at < line.size()) {
    const std::size_t start = line.find_first_not_of(kSpace, at);
    if (start == std::string_view::npos) break;
    const std::size_t end = std::min(line.find_first_of(kSpace, start), line.size());
    out.push_back(line.substr(start, end - start));
    at = end;
  }
  return out;
}

template <typename Each> void for_each_line(std::string_view text, Each each) {
  while (!text.empty()) {
    const std::size_t end = std::min(text.find('\n'), text.size());
    if (each(text.substr(0, end))) return;
    text.remove_prefix(std::min(end + 1, text.size()));
  }
}

} // namespace

std::optional<std::string> parse_cgroup2_path(std::string_view proc_cgroup) {
  std::optional<std::string> path;
  for_each_line(proc_cgroup, [&](std::string_view line) {
    if (!line.starts_with("0::")) return false;
    path = std::string(line.substr(3));
    return true;
  });
  return path;
}

std::optional<Cgroup2Mount> parse_cgroup2_mount(std::string_view mountinfo) {
  std::optional<Cgroup2Mount> mount;
  // ID PARENT MAJ:MIN ROOT MOUNT_POINT OPTIONS [OPTIONAL...] - FSTYPE SOURCE SUPER_OPTIONS
  for_each_line(mountinfo, [&](std::string_view line) {
    const std::vector<std::string_view> f = fields(line);
    std::size_t dash = 6;
    while (dash < f.size() && f[dash] != "-")
      ++dash;
    if (f.size() < 5 || dash + 1 >= f.size() || f[dash + 1] != "cgroup2") return false;
    mount = Cgroup2Mount{unescape_mountinfo(f[3]), unescape_mountinfo(f[4])};
    return true;
  });
  return mount;
}

std::optional<std::string> cgroup_directory(const Cgroup2Mount& mount, const std::string& path) {
  std::string rest = path;
  if (mount.root != "/") {
    if (!(path == mount.root || path.starts_with(mount.root + "/"))) return std::nullopt;
    rest = path.substr(mount.root.size());
  }
  std::string dir = mount.mount_point;
  while (dir.size() > 1 && dir.back() == '/')
    dir.pop_back();
  if (rest.empty() || rest == "/") return dir;
  return dir + (rest.front() == '/' ? "" : "/") + rest;
}

std::optional<std::uint64_t> parse_flat_key(std::string_view text, std::string_view key) {
  std::optional<std::uint64_t> value;
  for_each_line(text, [&](std::string_view line) {
    const std::vector<std::string_view> f = fields(line);
    if (f.size() != 2 || f[0] != key) return false;
    std::uint64_t n = 0;
    auto [end, err] = std::from_chars(f[1].data(), f[1].data() + f[1].size(), n);
    if (err == std::errc() && end == f[1].data() + f[1].size()) value = n;
    return true;
  });
  return value;
}

std::vector<std::string> split_words(std::string_view text) {
  std::vector<std::string> out;
  for (std::string_view w : fields(text))
    out.emplace_back(w);
  return out;
}

std::string bytes_text(std::uint64_t bytes) {
  if (bytes == ~std::uint64_t{0}) return "max";
  constexpr std::pair<unsigned, char> kUnits[] = {{40, 'T'}, {30, 'G'}, {20, 'M'}, {10, 'K'}};
  for (auto [shift, unit] : kUnits)
    if (bytes != 0 && bytes % (std::uint64_t{1} << shift) == 0)
      return std::to_string(bytes >> shift) + unit;
  return std::to_string(bytes);
}

std::optional<std::string> read_text_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return std::nullopt;
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::optional<std::string> own_cgroup_directory(std::string& why) {
  const std::optional<std::string> mountinfo = read_text_file("/proc/self/mountinfo");
  const std::optional<Cgroup2Mount> mount =
      mountinfo ? parse_cgroup2_mount(*mountinfo) : std::nullopt;
  if (!mount) {
    why = "no cgroup v2 hierarchy is mounted (/proc/self/mountinfo lists no cgroup2)";
    return std::nullopt;
  }
  const std::optional<std::string> cgroup = read_text_file("/proc/self/cgroup");
  const std::optional<std::string> path = cgroup ? parse_cgroup2_path(*cgroup) : std::nullopt;
  if (!path) {
    why = "/proc/self/cgroup has no cgroup v2 line (0::/path)";
    return std::nullopt;
  }
  std::optional<std::string> dir = cgroup_directory(*mount, *path);
  if (!dir)
    why = "this process's cgroup " + *path + " is outside the cgroup2 mount at " +
          mount->mount_point + " (its root is " + mount->root + ")";
  return dir;
}

} // namespace process_manager
