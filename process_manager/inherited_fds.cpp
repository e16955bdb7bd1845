#include "process_manager/inherited_fds.hpp"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <dirent.h>
#include <linux/close_range.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace process_manager {

std::vector<int> close_inherited_fds(std::vector<int> keep) {
  std::sort(keep.begin(), keep.end());
  auto kept = [&](int fd) { return fd < 3 || std::binary_search(keep.begin(), keep.end(), fd); };
  std::vector<int> open_fds;
  if (DIR* dir = opendir("/proc/self/fd")) {
    int own = dirfd(dir);
    while (dirent* e = readdir(dir)) {
      char* end = nullptr;
      long fd = std::strtol(e->d_name, &end, 10);
      if (*end == '\0' && end != e->d_name && fd != own && fd <= INT_MAX)
        open_fds.push_back(static_cast<int>(fd));
    }
    closedir(dir);
  } else { // no /proc: close the gaps between the kept fds, without knowing what was open
    unsigned from = 3;
    for (int fd : keep) {
      if (fd < 3) continue;
      if (static_cast<unsigned>(fd) > from)
        ::syscall(SYS_close_range, from, static_cast<unsigned>(fd) - 1, 0u);
      from = static_cast<unsigned>(fd) + 1;
    }
    ::syscall(SYS_close_range, from, ~0u, 0u);
    return {};
  }
  std::vector<int> closed;
  for (int fd : open_fds)
    if (!kept(fd) && ::close(fd) == 0) closed.push_back(fd);
  std::sort(closed.begin(), closed.end());
  return closed;
}

} // namespace process_manager
