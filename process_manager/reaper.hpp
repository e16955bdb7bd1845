#pragma once
// Collects exited children: waitpid(-1, WNOHANG) until none is left, each status classified with
// the wait macros (never `status >> 8`). The caller acts on the whole list afterwards, so that
// respawning never changes the table it is iterating (libuv's two-phase uv__wait_children).
#include <functional>
#include <string>
#include <sys/types.h>
#include <vector>

namespace process_manager {

struct ExitedChild {
  enum class Kind { Exited, Signaled };
  pid_t pid = 0;
  int status = 0; // raw wait status
  Kind kind = Kind::Exited;
  int code = 0;   // Exited: exit code
  int signal = 0; // Signaled: the signal
  bool core = false;
};

ExitedChild classify(pid_t pid, int status);

// "exited with code 3", "was killed by signal 11 (Segmentation fault), core dumped"
std::string describe(const ExitedChild& c);

class Reaper {
public:
  // Same contract as waitpid(-1, status, WNOHANG): a pid, 0 when none has exited, -1 and errno.
  using WaitFn = std::function<pid_t(int* status)>;

  Reaper();
  explicit Reaper(WaitFn wait) : wait_(std::move(wait)) {}

  std::vector<ExitedChild> reap();

private:
  WaitFn wait_;
};

} // namespace process_manager
