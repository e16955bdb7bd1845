#include "process_manager/proc_children.hpp"

#include "process_manager/cgroup_v2.hpp"

#include <cstdlib>
#include <dirent.h>
#include <memory>
#include <string>

namespace process_manager {

pid_t parent_of(pid_t pid) {
  const std::optional<std::string> stat = read_text_file("/proc/" + std::to_string(pid) + "/stat");
  if (!stat) return 0;
  // "PID (COMMAND) STATE PPID ...": the command may hold spaces and parentheses.
  const std::size_t close = stat->rfind(')');
  if (close == std::string::npos) return 0;
  const std::vector<std::string> fields = split_words(std::string_view(*stat).substr(close + 1));
  return fields.size() > 1 ? static_cast<pid_t>(std::atol(fields[1].c_str())) : 0;
}

bool descends_from(pid_t pid, pid_t ancestor) {
  for (int step = 0; step < kMaxAncestry; ++step) {
    if (pid == ancestor) return true;
    if (pid <= 1) return false;
    pid = parent_of(pid);
  }
  return true;
}

std::vector<pid_t> children_of(pid_t pid) {
  std::vector<pid_t> out;
  const std::string self = std::to_string(pid);
  if (std::optional<std::string> list =
          read_text_file("/proc/" + self + "/task/" + self + "/children")) {
    for (const std::string& word : split_words(*list))
      out.push_back(static_cast<pid_t>(std::atol(word.c_str())));
    return out;
  }
  std::unique_ptr<DIR, int (*)(DIR*)> proc(::opendir("/proc"), ::closedir);
  if (!proc) return out;
  while (const dirent* e = ::readdir(proc.get())) {
    const pid_t candidate = static_cast<pid_t>(std::atol(e->d_name));
    if (candidate > 0 && parent_of(candidate) == pid) out.push_back(candidate);
  }
  return out;
}

} // namespace process_manager
