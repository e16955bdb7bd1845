#include "fcgi_host/net/systemd_socket.hpp"

#include <cstdlib>
#include <string>
#include <unistd.h>

namespace fcgi_host {

int systemd_socket_count() {
  const char* pid = std::getenv("LISTEN_PID");
  const char* fds = std::getenv("LISTEN_FDS");
  if (!pid || !fds || std::atoi(pid) != ::getpid()) return 0;
  const int n = std::atoi(fds);
  return n > 0 && n < 1024 ? n : 0;
}

void forget_systemd_sockets() {
  for (const char* name : {"LISTEN_PID", "LISTEN_FDS", "LISTEN_FDNAMES"})
    ::unsetenv(name);
}

void pass_systemd_socket() {
  ::setenv("LISTEN_PID", std::to_string(::getpid()).c_str(), 1);
  ::setenv("LISTEN_FDS", "1", 1);
}

} // namespace fcgi_host
