#include "process_manager/log_file.hpp"

#include "process_manager/path_checks.hpp"

#include <cerrno>
#include <fcntl.h>
#include <system_error>
#include <unistd.h>

namespace process_manager {

namespace {

// Checked (path_checks.hpp): started as root, the master must not append to a file another user
// put there, or follow a link to one.
int open_append(const std::string& path) {
  return open_checked(path, O_WRONLY | O_APPEND | O_CREAT, 0640);
}

} // namespace

void LogFile::open(const std::string& path) {
  int fd = open_append(path);
  close();
  fd_ = fd;
  path_ = path;
}

void LogFile::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  path_.clear();
}

bool LogFile::reopen(std::string& why) {
  if (fd_ < 0) return true;
  int fd;
  try {
    fd = open_append(path_);
  } catch (const std::system_error& e) {
    why = e.what();
    return false;
  }
  // dup3 over the old descriptor keeps fd() valid for whoever captured it.
  ::dup3(fd, fd_, O_CLOEXEC);
  ::close(fd);
  return true;
}

void LogFile::adopt(int fd) {
  if (fd < 0) return;
  if (fd_ >= 0 && fd != fd_) ::dup3(fd, fd_, O_CLOEXEC);
  if (fd != fd_) ::close(fd);
}

void write_line(int fd, std::string_view line) {
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    ssize_t w = ::write(fd, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    p += w;
    left -= static_cast<std::size_t>(w);
  }
}

} // namespace process_manager
