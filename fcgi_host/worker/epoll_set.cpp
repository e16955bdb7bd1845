#include "fcgi_host/worker/epoll_set.hpp"

#include <unistd.h>

namespace fcgi_host {

EpollSet::EpollSet() : fd_(epoll_create1(EPOLL_CLOEXEC)) {}

EpollSet::~EpollSet() {
  if (fd_ >= 0) ::close(fd_);
}

} // namespace fcgi_host
