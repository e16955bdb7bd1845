#include "process_manager/oom_watch.hpp"

#include "process_manager/cgroup_v2.hpp"

#include <utility>

namespace process_manager {
namespace {

std::uint64_t oom_kills(const std::string& dir) {
  const std::optional<std::string> events = read_text_file(dir + "/memory.events");
  return events ? parse_flat_key(*events, "oom_kill").value_or(0) : 0;
}

// memory.max holds bytes or "max".
std::string memory_max_text(const std::string& dir) {
  const std::optional<std::string> text = read_text_file(dir + "/memory.max");
  if (!text) return "unknown";
  const std::vector<std::string> words = split_words(*text);
  if (words.empty() || words.front() == "max") return "max";
  try {
    return bytes_text(std::stoull(words.front()));
  } catch (const std::exception&) {
    return words.front();
  }
}

} // namespace

OomWatch::OomWatch(std::string cgroup_name) : name_(std::move(cgroup_name)) {
  dir_ = pool_cgroup();
  if (!dir_.empty()) seen_ = oom_kills(dir_);
}

std::string OomWatch::pool_cgroup() const {
  std::string why;
  const std::optional<std::string> dir = own_cgroup_directory(why);
  if (!dir || !dir->ends_with("/" + name_)) return "";
  return *dir;
}

std::string OomWatch::explain_sigkill() {
  const std::string dir = pool_cgroup();
  if (dir.empty()) return "";
  if (dir != dir_) { // moved into a new cgroup since: its count started at 0
    dir_ = dir;
    seen_ = 0;
  }
  const std::uint64_t now = oom_kills(dir);
  const bool rose = now > seen_;
  seen_ = now;
  if (!rose) return "";
  return "killed by the OOM killer (memory-max " + memory_max_text(dir) + ")";
}

} // namespace process_manager
