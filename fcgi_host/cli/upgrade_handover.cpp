#include "fcgi_host/cli/upgrade_handover.hpp"

#include "fcgi_host/config/exec_env.hpp"
#include "fcgi_host/net/fd_from_env.hpp"
#include "fcgi_host/net/systemd_socket.hpp"

#include <climits>
#include <cstdlib>
#include <fcntl.h>
#include <tuple>
#include <unistd.h>
#include <utility>

namespace fcgi_host {
namespace {

using exec_env::kHandoffRecvFd;
using exec_env::kHandoffSendFd;
using exec_env::kHealthFd;
using exec_env::kHealthFile;
using exec_env::kListenFd;
using exec_env::kPidfileFd;
using exec_env::kSocketFile;
using exec_env::kStatusFd;
using exec_env::kStatusFile;
using exec_env::kUpgradeFd;

void set_env(const char* name, const std::string& value) {
  ::setenv(name, value.c_str(), 1);
}

} // namespace

bool export_handover(const UpgradeHandover& h) {
  // The socket, the ready pipe, the handoff channel and the pidfile's lock cross exec, nothing
  // else (the ready pipe's write end is made inheritable by process_manager's fork).
  if (::fcntl(h.listen_fd, F_SETFD, 0) != 0) return false;
  set_env(kListenFd, std::to_string(h.listen_fd));
  set_env(kUpgradeFd, std::to_string(h.ready_fd));
  if (!h.socket_file.empty()) set_env(kSocketFile, h.socket_file.to_text());
  // The status socket crosses too (else the new master would find it held by the old one, which
  // removes its path as it exits): one that cannot be kept is left to the new master to bind.
  for (auto [fd, file, fd_env, file_env] :
       {std::tuple{h.status_fd, &h.status_file, kStatusFd, kStatusFile},
        std::tuple{h.health_fd, &h.health_file, kHealthFd, kHealthFile}})
    if (fd >= 0 && ::fcntl(fd, F_SETFD, 0) == 0) {
      set_env(fd_env, std::to_string(fd));
      if (!file->empty()) set_env(file_env, file->to_text());
    }
  for (auto [fd, env] :
       {std::pair{h.handoff.send_fd, kHandoffSendFd}, std::pair{h.handoff.recv_fd, kHandoffRecvFd},
        std::pair{h.pidfile_fd, kPidfileFd}})
    if (fd >= 0 && ::fcntl(fd, F_SETFD, 0) == 0) // else the new master makes its own
      set_env(env, std::to_string(fd));
  return true;
}

UpgradeHandover take_handover(const std::string& socket_path, const std::string& status_path,
                              const std::string& health_path) {
  UpgradeHandover h;
  for (auto [fd, file, path, fd_env, file_env] :
       {std::tuple{&h.status_fd, &h.status_file, &status_path, kStatusFd, kStatusFile},
        std::tuple{&h.health_fd, &h.health_file, &health_path, kHealthFd, kHealthFile}}) {
    *fd = take_fd_from_env(fd_env);
    if (const char* text = std::getenv(file_env); text && *fd >= 0)
      *file = SocketFile::from_text(*path, text);
    ::unsetenv(file_env);
  }
  h.ready_fd = take_fd_from_env(kUpgradeFd);
  h.listen_fd = take_fd_from_env(kListenFd);
  h.pidfile_fd = take_fd_from_env(kPidfileFd);
  if (const char* text = std::getenv(kSocketFile); text && h.listen_fd >= 0)
    h.socket_file = SocketFile::from_text(socket_path, text);
  ::unsetenv(kSocketFile);
  return h;
}

HandoffChannel take_handoff_channel() {
  HandoffChannel c;
  c.send_fd = take_fd_from_env(kHandoffSendFd);
  c.recv_fd = take_fd_from_env(kHandoffRecvFd);
  return c;
}

std::vector<int> inherited_fds_to_keep() {
  std::vector<int> keep;
  for (const char* name :
       {kListenFd, kUpgradeFd, kHandoffSendFd, kHandoffRecvFd, kPidfileFd, kStatusFd, kHealthFd})
    if (const char* v = std::getenv(name)) keep.push_back(std::atoi(v));
  for (int i = 0; i < systemd_socket_count(); ++i)
    keep.push_back(kSystemdFirstFd + i);
  return keep;
}

std::string own_executable() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "/proc/self/exe";
  std::string path(buf, static_cast<std::size_t>(n));
  if (path.ends_with(" (deleted)")) path.resize(path.size() - 10);
  return path;
}

} // namespace fcgi_host
