#pragma once
// The listening socket, bound once by the master before any fork and never closed on reload.
// libfcgi's FCGX_OpenSocket is not used: it is IPv4-only, exit()s on a bind error and unlinks a
// Unix socket path without checking whether a live server holds it.
#include "fcgi_host/net/listen_options.hpp"
#include "fcgi_host/net/socket_file.hpp"
#include "fcgi_host/sys_error.hpp" // StartupError, which the constructor throws

#include <string>

namespace fcgi_host {

// Whether the listening socket `fd` is bound to `address` (its Unix path, or its TCP port): a
// socket handed over across exec for another address is not to be served on.
bool is_bound_to(int fd, const ListenAddress& address);

class ListenSocket {
public:
  // Binds what options.address names (or takes the inherited socket), applies the Unix socket's
  // mode and owner before listen(), so no connection arrives before the permissions are in
  // place. Throws StartupError naming the call and the object.
  explicit ListenSocket(const ListenOptions& options);
  // A socket already bound and listening, handed over by a binary upgrade: `file` is the path
  // the old master bound (empty for TCP), removed at the stop if still it.
  ListenSocket(int fd, SocketFile file, std::string description);
  ~ListenSocket();
  ListenSocket(const ListenSocket&) = delete;
  ListenSocket& operator=(const ListenSocket&) = delete;

  int fd() const { return fd_; }
  bool is_unix() const { return is_unix_; }
  const std::string& description() const { return description_; }
  // The socket file this host bound (empty for TCP and inherited sockets).
  const SocketFile& file() const { return file_; }
  // The start of a stop: the path goes first (if it is still ours), so that a new connection
  // gets "no such file" and nginx tries its next upstream, then this process's copy of the
  // socket closes; the socket itself closes with the last worker's copy.
  void stop_listening();
  // After a binary upgrade the socket file belongs to the new master, which removes it.
  void forget_path() { file_.forget(); }

private:
  void open_unix(const ListenOptions& options);
  void bind_in_place(const ListenOptions& options, uid_t uid, gid_t gid);
  void bind_and_rename(const ListenOptions& options, uid_t uid, gid_t gid);
  void open_tcp(const ListenOptions& options);
  void take_inherited();

  int fd_ = -1;
  bool is_unix_ = false;
  std::string description_;
  SocketFile file_; // the socket file we created: removed when the master stops
};

} // namespace fcgi_host
