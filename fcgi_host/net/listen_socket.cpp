#include "fcgi_host/net/listen_socket.hpp"

#include "fcgi_host/net/systemd_socket.hpp"

#include "fcgi_host/sys_error.hpp"
#include "process_manager/path_checks.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <grp.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pwd.h>
#include <string_view>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <utility>

namespace fcgi_host {
namespace {

bool is_listening_socket(int fd) {
  int listening = 0;
  socklen_t len = sizeof listening;
  return getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &len) == 0 && listening;
}

int socket_family(int fd) {
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return -1;
  return ss.ss_family;
}

sockaddr_un unix_address(const std::string& path) {
  sockaddr_un sun{};
  sun.sun_family = AF_UNIX;
  std::memcpy(sun.sun_path, path.c_str(), path.size() + 1);
  return sun;
}

// A Unix socket path may be left over from a server that died. It is ours to replace only if
// nobody answers on it; a live server keeps it, and we refuse to start.
void clear_stale_unix_path(const std::string& path) {
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return;
    throw StartupError(sys_error("stat", path));
  }
  if (!S_ISSOCK(st.st_mode))
    throw StartupError("\"" + path + "\" exists and is not a socket; refusing to replace it");
  int probe = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (probe < 0) throw StartupError(sys_error("socket", path));
  sockaddr_un sun = unix_address(path);
  int rc = connect(probe, reinterpret_cast<sockaddr*>(&sun), sizeof sun);
  int err = errno;
  close(probe);
  if (rc == 0 || err == EAGAIN)
    throw StartupError("another server is listening on \"" + path + "\"; not starting");
  if (err != ECONNREFUSED) throw StartupError(sys_error("connect", path, err));
  if (unlink(path.c_str()) != 0) throw StartupError(sys_error("unlink", path));
}

uid_t lookup_user(const std::string& name) {
  if (passwd* pw = getpwnam(name.c_str())) return pw->pw_uid;
  throw StartupError("socket-owner: unknown user \"" + name + "\"");
}

gid_t lookup_group(const std::string& name) {
  if (group* gr = getgrnam(name.c_str())) return gr->gr_gid;
  throw StartupError("socket-group: unknown group \"" + name + "\"");
}

} // namespace

ListenSocket::ListenSocket(const ListenOptions& options) {
  // Under systemd socket activation the socket unit owns the address: take its socket even when
  // the config also names one (the same config then works with and without the .socket unit).
  if (systemd_socket_count() > 0) {
    take_inherited();
    return;
  }
  switch (options.address.kind) {
  case ListenAddress::Kind::Unix:
    open_unix(options);
    break;
  case ListenAddress::Kind::Tcp:
    open_tcp(options);
    break;
  case ListenAddress::Kind::Inherited:
    take_inherited();
    break;
  }
}

namespace {

// A Unix socket keeps the name bind() was given: ours are bound at "DIR/NAME" itself in a
// directory nobody else writes, and as "DIR/.NAME-XXXXXX/s", renamed to "DIR/NAME", in a shared
// one (PrivateBindDir below).
bool bound_as(std::string_view bound, const std::string& path) {
  if (bound == path) return true;
  const std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return false;
  const std::string prefix = path.substr(0, slash) + "/." + path.substr(slash + 1) + "-";
  return bound.starts_with(prefix) && bound.ends_with("/s") &&
         bound.size() == prefix.size() + 6 + 2;
}

} // namespace

bool is_bound_to(int fd, const ListenAddress& address) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return false;
  switch (address.kind) {
  case ListenAddress::Kind::Unix:
    return a.ss_family == AF_UNIX &&
           bound_as(reinterpret_cast<const sockaddr_un&>(a).sun_path, address.path);
  case ListenAddress::Kind::Tcp:
    if (a.ss_family == AF_INET)
      return ntohs(reinterpret_cast<const sockaddr_in&>(a).sin_port) == address.port;
    return a.ss_family == AF_INET6 &&
           ntohs(reinterpret_cast<const sockaddr_in6&>(a).sin6_port) == address.port;
  case ListenAddress::Kind::Inherited:
    break;
  }
  return false;
}

ListenSocket::ListenSocket(int fd, SocketFile file, std::string description)
    : fd_(fd), description_(std::move(description)), file_(std::move(file)) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  is_unix_ =
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0 && a.ss_family == AF_UNIX;
}

ListenSocket::~ListenSocket() {
  stop_listening();
}

void ListenSocket::stop_listening() {
  file_.remove_if_ours();
  if (fd_ >= 0) close(std::exchange(fd_, -1));
}

namespace {

// A directory of the master's own (0700) next to the socket's path, where the socket is bound
// and given its owner and mode by path with nobody else able to reach it; removed with what is
// left in it.
class PrivateBindDir {
public:
  explicit PrivateBindDir(const std::string& socket_path) {
    // "/run/app/.app.sock-XXXXXX/s": the name the socket stays bound to, which `ss -lx` and
    // /proc/net/unix show (the kernel keeps the name given to bind()).
    const std::size_t slash = socket_path.find_last_of('/');
    std::string dir = slash == std::string::npos ? "." : socket_path.substr(0, slash);
    std::string name = slash == std::string::npos ? socket_path : socket_path.substr(slash + 1);
    std::string tmpl = dir + "/." + name + "-XXXXXX";
    if (!mkdtemp(tmpl.data())) throw StartupError(sys_error("mkdtemp", tmpl));
    dir_ = tmpl;
    path_ = dir_ + "/s";
    if (path_.size() >= sizeof(sockaddr_un::sun_path))
      throw StartupError("unix socket path \"" + socket_path +
                         "\" is too long to bind the socket in a private directory beside it (" +
                         std::to_string(sizeof(sockaddr_un::sun_path) - 11) + " bytes at most)");
  }
  ~PrivateBindDir() {
    ::unlink(path_.c_str());
    ::rmdir(dir_.c_str());
  }
  PrivateBindDir(const PrivateBindDir&) = delete;
  PrivateBindDir& operator=(const PrivateBindDir&) = delete;
  const std::string& path() const { return path_; }

private:
  std::string dir_, path_;
};

// Binds `fd` at `bind_path` with no mode bits (umask 0777: nobody connects before its mode is
// set); errors name `path`, the socket's own.
void bind_without_mode(int fd, const std::string& bind_path, const std::string& path) {
  sockaddr_un sun = unix_address(bind_path);
  mode_t old_umask = umask(0777);
  int rc = bind(fd, reinterpret_cast<sockaddr*>(&sun), sizeof sun);
  int err = errno;
  umask(old_umask);
  if (rc != 0) throw StartupError(sys_error("bind", path, err));
}

// The socket file at `bind_path` given its owner (-1: unchanged) and mode, by path.
void give_owner_and_mode(const std::string& bind_path, const std::string& path, uid_t uid,
                         gid_t gid, mode_t mode) {
  if ((uid != static_cast<uid_t>(-1) || gid != static_cast<gid_t>(-1)) &&
      chown(bind_path.c_str(), uid, gid) != 0)
    throw StartupError(sys_error("chown", path));
  if (chmod(bind_path.c_str(), mode) != 0) throw StartupError(sys_error("chmod", path));
}

// Whether the directory holding `path` is writable by nobody but root and this user (no write
// bit for others, group write only for root's group or this process's): no other user can make,
// rename or remove an entry in it. (unsafe_directory_of() has checked it and those above.)
bool directory_is_private(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "."
                          : slash == 0               ? "/"
                                                     : path.substr(0, slash);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) return false;
  const bool group_writes =
      (st.st_mode & S_IWGRP) != 0 && st.st_gid != 0 && st.st_gid != ::getegid();
  return (st.st_mode & S_IWOTH) == 0 && !group_writes;
}

// rename() that never replaces what is at `to` (a server that appeared there meanwhile).
int rename_no_replace(const std::string& from, const std::string& to) {
  if (::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE) == 0) return 0;
  if (errno != EINVAL && errno != ENOSYS) return -1;
  struct stat st {}; // a file system without RENAME_NOREPLACE: checked, then renamed
  if (::lstat(to.c_str(), &st) == 0) {
    errno = EEXIST;
    return -1;
  }
  return ::rename(from.c_str(), to.c_str());
}

} // namespace

void ListenSocket::open_unix(const ListenOptions& options) {
  const std::string& path = options.address.path;
  is_unix_ = true;
  description_ = "unix:" + path;
  uid_t uid = options.owner.empty() ? static_cast<uid_t>(-1) : lookup_user(options.owner);
  gid_t gid = options.group.empty() ? static_cast<gid_t>(-1) : lookup_group(options.group);
  // A directory another user can write is one where that user can swap the socket's name for a
  // link between any two calls of ours (path_checks.hpp): refused, as sshd refuses such homes.
  if (std::string why = process_manager::unsafe_directory_of(path); !why.empty())
    throw StartupError("unix socket \"" + path + "\" refused: " + why);
  clear_stale_unix_path(path);

  fd_ = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd_ < 0) throw StartupError(sys_error("socket", path));
  if (directory_is_private(path)) {
    bind_in_place(options, uid, gid);
  } else {
    bind_and_rename(options, uid, gid);
  }
  if (listen(fd_, options.backlog) != 0) throw StartupError(sys_error("listen", path));
}

// In a directory nobody else may write (the usual /run/app): bound at its path, so `ss -lx`,
// lsof and /proc/net/unix name it, with no mode at first (umask 0777) and then its owner and
// mode by path: nobody but root and this user can put anything at that name meanwhile.
void ListenSocket::bind_in_place(const ListenOptions& options, uid_t uid, gid_t gid) {
  const std::string& path = options.address.path;
  bind_without_mode(fd_, path, path);
  file_ = SocketFile::record(path); // removed by a failure below, as at the stop
  give_owner_and_mode(path, path, uid, gid, options.mode);
}

// In a directory others may write (a sticky /tmp): bound in a private directory beside it.
void ListenSocket::bind_and_rename(const ListenOptions& options, uid_t uid, gid_t gid) {
  const std::string& path = options.address.path;
  // Bound, given its owner and mode in a private directory, then renamed into place whole: the
  // socket appears at its path with its final owner and mode, and no chown or chmod ever
  // follows a name someone else could change. (Linux ignores fchown and fchmod on an AF_UNIX
  // socket's descriptor for the file: the path is the only handle.)
  PrivateBindDir bind_dir(path);
  bind_without_mode(fd_, bind_dir.path(), path);
  give_owner_and_mode(bind_dir.path(), path, uid, gid, options.mode);
  SocketFile bound = SocketFile::record(bind_dir.path());
  if (rename_no_replace(bind_dir.path(), path) != 0) {
    if (errno == EEXIST)
      throw StartupError("\"" + path + "\" appeared while the socket was bound; not starting");
    throw StartupError(sys_error("rename", path));
  }
  file_ = SocketFile::record(path);
  if (file_.to_text() != bound.to_text()) // never: nobody else writes the directory
    throw StartupError("\"" + path + "\" is not the socket just bound; not starting");
}

void ListenSocket::open_tcp(const ListenOptions& options) {
  const ListenAddress& a = options.address;
  description_ = a.to_string();
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  std::string port = std::to_string(a.port);
  // Every address: the IPv6 wildcard with V6ONLY off also takes IPv4 connections.
  const char* host = a.host.empty() ? "::" : a.host.c_str();
  int rc = getaddrinfo(host, port.c_str(), &hints, &found);
  if (rc != 0 && a.host.empty()) rc = getaddrinfo("0.0.0.0", port.c_str(), &hints, &found);
  if (rc != 0)
    throw StartupError("getaddrinfo(\"" + description_ + "\") failed: " + gai_strerror(rc));
  std::string last_error;
  for (addrinfo* ai = found; ai; ai = ai->ai_next) {
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      last_error = sys_error("socket", description_);
      continue;
    }
    int on = 1, off = 0;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    if (ai->ai_family == AF_INET6 && a.host.empty())
      setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);
    // Accepted sockets inherit TCP_NODELAY: a response is one write, never held back by Nagle.
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    // A web server always speaks first: wake a worker only once the request's bytes are there,
    // so its first read finds them instead of going back to epoll.
    int defer_seconds = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_DEFER_ACCEPT, &defer_seconds, sizeof defer_seconds);
    if (bind(fd, ai->ai_addr, ai->ai_addrlen) == 0 && listen(fd, options.backlog) == 0) {
      fd_ = fd;
      break;
    }
    last_error =
        sys_error(errno == EADDRINUSE || errno == EACCES ? "bind" : "listen", description_);
    close(fd);
  }
  freeaddrinfo(found);
  if (fd_ < 0) throw StartupError(last_error);
}

void ListenSocket::take_inherited() {
  int fd = -1;
  if (systemd_socket_count() > 0) {
    fd = kSystemdFirstFd;
    description_ = "systemd socket (fd 3)";
    forget_systemd_sockets();
  } else {
    fd = 0;
    description_ = "inherited socket (fd 0)";
  }
  if (!is_listening_socket(fd))
    throw StartupError("no --listen given and fd " + std::to_string(fd) +
                       " is not a listening socket (start fcgi-host with --listen ADDR, under "
                       "spawn-fcgi, or from a systemd socket unit)");
  // Move it off fd 0 so that workers can have a normal stdin (/dev/null).
  int moved = fcntl(fd, F_DUPFD_CLOEXEC, 3);
  if (moved < 0) throw StartupError(sys_error("fcntl(F_DUPFD_CLOEXEC)", description_));
  close(fd);
  if (fd == 0) {
    int null = open("/dev/null", O_RDONLY); // takes fd 0 again
    if (null > 0) close(null);
  }
  fd_ = moved;
  is_unix_ = socket_family(fd_) == AF_UNIX;
}

} // namespace fcgi_host
