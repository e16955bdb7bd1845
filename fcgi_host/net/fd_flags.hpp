#pragma once
// O_NONBLOCK on or off for an open file, checked. The flag belongs to the open file description,
// which every process holding the fd shares.
#include <fcntl.h>

namespace fcgi_host {

// False (errno set) when fcntl fails.
inline bool set_nonblocking(int fd, bool on) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0) return false;
  int wanted = on ? flags | O_NONBLOCK : flags & ~O_NONBLOCK;
  return wanted == flags || ::fcntl(fd, F_SETFL, wanted) == 0;
}

} // namespace fcgi_host
