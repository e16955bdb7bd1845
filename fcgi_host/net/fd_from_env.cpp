#include "fcgi_host/net/fd_from_env.hpp"

#include <climits>
#include <cstdlib>
#include <fcntl.h>

namespace fcgi_host {

int take_fd_from_env(const char* name) {
  const char* v = std::getenv(name);
  int fd = -1;
  if (v && *v) {
    char* end = nullptr;
    const long n = std::strtol(v, &end, 10);
    if (*end == '\0' && n >= 0 && n < INT_MAX && ::fcntl(static_cast<int>(n), F_GETFD) != -1)
      fd = static_cast<int>(n);
  }
  ::unsetenv(name);
  if (fd >= 0) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  return fd;
}

} // namespace fcgi_host
