#pragma once
// What a listening socket is bound with: the address and, for a Unix socket, the file's mode and
// owner. Defaults: the option table (--backlog, --socket-mode).
#include "fcgi_host/config/option_table.hpp"
#include "fcgi_host/net/listen_address.hpp"

#include <string>
#include <sys/types.h>

namespace fcgi_host {

struct ListenOptions {
  ListenAddress address; // Kind::Inherited: the socket systemd or the starting process passed
  int backlog = static_cast<int>(default_size("backlog"));
  mode_t mode = default_octal("socket-mode"); // Unix socket file
  std::string owner;                          // empty: the user fcgi-host runs as
  std::string group;
};

} // namespace fcgi_host
