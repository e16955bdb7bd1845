#include "process_manager/reaper.hpp"

#include <cerrno>
#include <cstring>
#include <sys/wait.h>

namespace process_manager {

ExitedChild classify(pid_t pid, int status) {
  ExitedChild c;
  c.pid = pid;
  c.status = status;
  if (WIFSIGNALED(status)) {
    c.kind = ExitedChild::Kind::Signaled;
    c.signal = WTERMSIG(status);
    c.core = WCOREDUMP(status);
  } else {
    c.kind = ExitedChild::Kind::Exited;
    c.code = WEXITSTATUS(status);
  }
  return c;
}

std::string describe(const ExitedChild& c) {
  if (c.kind == ExitedChild::Kind::Exited) return "exited with code " + std::to_string(c.code);
  return "was killed by signal " + std::to_string(c.signal) + " (" + strsignal(c.signal) + ")" +
         (c.core ? ", core dumped" : "");
}

Reaper::Reaper() : wait_([](int* status) { return waitpid(-1, status, WNOHANG); }) {}

std::vector<ExitedChild> Reaper::reap() {
  std::vector<ExitedChild> exited;
  for (;;) {
    int status = 0;
    pid_t pid = wait_(&status);
    if (pid > 0) {
      exited.push_back(classify(pid, status));
      continue;
    }
    if (pid == -1 && errno == EINTR) continue;
    return exited; // 0: none left that has exited; ECHILD: no children at all
  }
}

} // namespace process_manager
