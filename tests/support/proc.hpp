#pragma once
// What /proc says about processes: one parser of /proc/PID/stat for every test layer.
#include <cstdlib>
#include <dirent.h>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <sys/types.h>
#include <vector>

namespace test_support {

struct ProcStat {
  char state = '?'; // 'R', 'S', 'Z', ...
  pid_t ppid = 0;
  pid_t pgrp = 0;
  // The main thread has exited but another thread has not yet: the process still holds its
  // files (a listening socket among them), so it has not exited.
  bool threads_left = false;
  // Exists and has not exited (a zombie has exited; it still answers kill(pid, 0)).
  bool running() const { return threads_left || (state != 'Z' && state != 'X'); }
};

// How many threads /proc/PID/task lists, the exited main thread included.
inline int task_count(pid_t pid) {
  int n = 0;
  DIR* d = ::opendir(("/proc/" + std::to_string(pid) + "/task").c_str());
  if (!d) return 0;
  while (dirent* e = ::readdir(d))
    n += e->d_name[0] != '.';
  ::closedir(d);
  return n;
}

// nullopt when there is no such process.
inline std::optional<ProcStat> proc_stat(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  std::getline(in, stat);
  // The command name is in parentheses and may contain anything: parse after the last ')'.
  auto close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(stat.substr(close + 1));
  ProcStat s;
  fields >> s.state >> s.ppid >> s.pgrp;
  if (!fields) return std::nullopt;
  s.threads_left = s.state == 'Z' && task_count(pid) > 1;
  return s;
}

inline std::vector<pid_t> all_pids() {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long n = std::strtol(e->d_name, &end, 10);
    if (n > 0 && end && *end == '\0') out.push_back(static_cast<pid_t>(n));
  }
  ::closedir(d);
  return out;
}

// The running (non-zombie) processes whose stat fields satisfy `keep`.
template <class Keep> std::vector<pid_t> running_pids(Keep keep) {
  std::vector<pid_t> out;
  for (pid_t p : all_pids())
    if (auto s = proc_stat(p); s && s->running() && keep(*s)) out.push_back(p);
  return out;
}

// The process's resident memory (VmRSS) in KiB; -1 when there is no such process.
inline long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::strtol(line.c_str() + 6, nullptr, 10);
  return -1;
}

} // namespace test_support
