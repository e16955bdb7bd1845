#include "process_manager/log_file.hpp"

#include <cerrno>
#include <fcntl.h>
#include <system_error>
#include <unistd.h>

namespace process_manager {

namespace {

int open_append(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
  if (fd == -1)
    throw std::system_error(errno, std::generic_category(), "open(\"" + path + "\") failed");
  return fd;
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
