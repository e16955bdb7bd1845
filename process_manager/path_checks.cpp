#include "process_manager/path_checks.hpp"

#include <cerrno>
#include <cstdio>
#include <fcntl.h>
#include <system_error>
#include <unistd.h>

namespace process_manager {
namespace {

std::string octal(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

// "" when `dir` itself is safe (owner, write bits, sticky bit).
std::string unsafe_directory(const std::string& dir) {
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    return "stat(\"" + dir + "\") failed: " + std::system_category().message(errno);
  if (!S_ISDIR(st.st_mode)) return "\"" + dir + "\" is not a directory";
  if (st.st_uid != 0 && st.st_uid != ::geteuid())
    return "directory \"" + dir + "\" is owned by uid " + std::to_string(st.st_uid) +
           " (neither root nor this user)";
  // Writable by a group other than root's and this process's own, or by everyone, without the
  // sticky bit: another user may put a link where the file will be, or swap the file itself. (A
  // non-root host in a container gets its socket volume writable by its own group: fsGroup.)
  const bool group_writes =
      (st.st_mode & S_IWGRP) != 0 && st.st_gid != 0 && st.st_gid != ::getegid();
  if ((group_writes || (st.st_mode & S_IWOTH) != 0) && (st.st_mode & S_ISVTX) == 0)
    return "directory \"" + dir + "\" is writable by " +
           ((st.st_mode & S_IWOTH) ? "others" : "group " + std::to_string(st.st_gid)) + " (mode " +
           octal(st.st_mode) + ") without the sticky bit";
  return "";
}

} // namespace

std::string unsafe_directory_of(const std::string& path) {
  std::string dir = path.substr(0, path.find_last_of('/'));
  if (path.find('/') == std::string::npos) {
    char cwd[4096];
    if (!::getcwd(cwd, sizeof cwd)) return "getcwd() failed";
    dir = cwd;
  }
  if (dir.empty()) dir = "/";
  for (;;) {
    if (std::string why = unsafe_directory(dir); !why.empty()) return why;
    if (dir == "/") return "";
    std::size_t slash = dir.find_last_of('/');
    dir = slash == 0 || slash == std::string::npos ? "/" : dir.substr(0, slash);
  }
}

std::string unsafe_file(const struct stat& st) {
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  if (st.st_uid != ::geteuid())
    return "owned by uid " + std::to_string(st.st_uid) + ", not by this user (uid " +
           std::to_string(::geteuid()) + ")";
  return "";
}

std::string unsafe_config_file(const struct stat& st) {
  return unsafe_config_file(st, ::geteuid(), ::getegid());
}

std::string unsafe_config_file(const struct stat& st, uid_t owner, gid_t owner_group) {
  if (!S_ISREG(st.st_mode)) return "not a regular file";
  if (st.st_uid != 0 && st.st_uid != owner)
    return "owned by uid " + std::to_string(st.st_uid) + " (neither root nor " +
           (owner == ::geteuid() ? "this user" : "the master's user") + ")";
  const bool group_writes =
      (st.st_mode & S_IWGRP) != 0 && st.st_gid != 0 && st.st_gid != owner_group;
  if (group_writes || (st.st_mode & S_IWOTH) != 0)
    return std::string("writable by ") +
           ((st.st_mode & S_IWOTH) ? "others" : "group " + std::to_string(st.st_gid)) + " (mode " +
           octal(st.st_mode) + ")";
  return "";
}

int open_checked(const std::string& path, int flags, mode_t mode) {
  auto refuse = [&path](int err, const std::string& why) {
    throw std::system_error(err, std::generic_category(), "open(\"" + path + "\") refused: " + why);
  };
  if (std::string why = unsafe_directory_of(path); !why.empty()) refuse(EPERM, why);
  int fd = ::open(path.c_str(), flags | O_NOFOLLOW | O_CLOEXEC | O_NOCTTY, mode);
  if (fd < 0) {
    int err = errno;
    if (err == ELOOP) refuse(err, "it is a symbolic link");
    throw std::system_error(err, std::generic_category(), "open(\"" + path + "\") failed");
  }
  struct stat st {};
  std::string why = ::fstat(fd, &st) != 0 ? "fstat() failed" : unsafe_file(st);
  if (!why.empty()) {
    ::close(fd);
    refuse(EPERM, why);
  }
  return fd;
}

} // namespace process_manager
