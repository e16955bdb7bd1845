#include "process_manager/log.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fcntl.h>
#include <system_error>
#include <unistd.h>

namespace process_manager {

const char* to_string(LogLevel l) {
  switch (l) {
  case LogLevel::Debug:
    return "debug";
  case LogLevel::Info:
    return "info";
  case LogLevel::Notice:
    return "notice";
  case LogLevel::Warn:
    return "warn";
  case LogLevel::Error:
    return "error";
  case LogLevel::Alert:
    return "alert";
  }
  return "?";
}

bool parse_log_level(std::string_view text, LogLevel& out) {
  for (LogLevel l : {LogLevel::Debug, LogLevel::Info, LogLevel::Notice, LogLevel::Warn,
                     LogLevel::Error, LogLevel::Alert}) {
    if (text == to_string(l)) {
      out = l;
      return true;
    }
  }
  if (text == "warning") {
    out = LogLevel::Warn;
    return true;
  }
  return false;
}

Log& Log::get() {
  static Log log;
  return log;
}

static int open_log_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
  if (fd == -1)
    throw std::system_error(errno, std::generic_category(), "open(\"" + path + "\") failed");
  return fd;
}

void Log::open(const std::string& path) {
  int fd = path.empty() ? 2 : open_log_file(path);
  if (fd_ != 2) ::close(fd_);
  fd_ = fd;
  path_ = path;
}

void Log::reopen() {
  if (path_.empty()) return;
  int fd;
  try {
    fd = open_log_file(path_);
  } catch (const std::system_error& e) {
    // Keep writing to the old file rather than losing lines.
    write(LogLevel::Error, std::string("reopen: ") + e.what());
    return;
  }
  // dup3 over the old descriptor keeps fd() stable for whoever captured it.
  ::dup3(fd, fd_, O_CLOEXEC);
  ::close(fd);
}

void Log::write(LogLevel l, std::string_view message) {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  tm local;
  localtime_r(&ts.tv_sec, &local);
  char stamp[64];
  std::size_t n = strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &local);
  std::snprintf(stamp + n, sizeof stamp - n, ".%03ld [%s] %d", ts.tv_nsec / 1'000'000, to_string(l),
                static_cast<int>(getpid()));

  std::string line;
  line.reserve(std::strlen(stamp) + tag_.size() + message.size() + 4);
  line.append(stamp);
  if (!tag_.empty()) line.append(" ").append(tag_);
  line.append(": ").append(message).push_back('\n');

  // One write(2) per line (appends of whole lines do not interleave); loop only on a short write.
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    ssize_t w = ::write(fd_, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return; // nowhere left to report it
    p += w;
    left -= static_cast<std::size_t>(w);
  }
}

} // namespace process_manager
