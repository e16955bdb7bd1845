#include "process_manager/thread_sched.hpp"

#include "process_manager/cgroup_v2.hpp"

#include <charconv>
#include <string>

namespace process_manager {
namespace {

// The next unsigned number in `text` from `at` (spaces skipped), or false.
bool next_number(std::string_view text, std::size_t& at, std::uint64_t& out) {
  while (at < text.size() && text[at] == ' ')
    ++at;
  auto [end, ec] = std::from_chars(text.data() + at, text.data() + text.size(), out);
  if (ec != std::errc()) return false;
  at = static_cast<std::size_t>(end - text.data());
  return true;
}

} // namespace

ThreadSched parse_thread_sched(std::string_view stat, std::string_view schedstat) {
  ThreadSched t;
  // "TID (COMMAND) STATE ...": the command may hold spaces and parentheses.
  const std::size_t close = stat.rfind(')');
  if (close == std::string_view::npos || close + 2 >= stat.size()) return t;
  std::size_t at = 0;
  if (!next_number(schedstat, at, t.run_ns) || !next_number(schedstat, at, t.wait_ns)) return t;
  t.runnable = stat[close + 2] == 'R';
  t.known = true;
  return t;
}

ThreadSched read_thread_sched(pid_t pid, pid_t tid) {
  const std::string dir = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid) + "/";
  const std::optional<std::string> stat = read_text_file(dir + "stat");
  const std::optional<std::string> schedstat = read_text_file(dir + "schedstat");
  if (!stat || !schedstat) return {};
  return parse_thread_sched(*stat, *schedstat);
}

} // namespace process_manager
