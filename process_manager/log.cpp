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

void Log::open(const std::string& path) {
  if (path.empty())
    file_.close();
  else
    file_.open(path);
}

void Log::reopen() {
  std::string why;
  if (!file_.reopen(why)) write(LogLevel::Error, "reopen: " + why + "; keeping the old file");
}

void append_log_escaped(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (char c : text) {
    auto b = static_cast<unsigned char>(c);
    if (b >= 0x20 && b != 0x7f) {
      out.push_back(c);
    } else {
      const char escaped[4] = {'\\', 'x', kHex[b >> 4], kHex[b & 0xf]};
      out.append(escaped, sizeof escaped);
    }
  }
}

std::string log_escaped(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  append_log_escaped(out, text);
  return out;
}

void Log::write(LogLevel l, std::string_view message, std::string_view block) {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  tm local;
  localtime_r(&ts.tv_sec, &local);
  char stamp[64];
  std::size_t n = strftime(stamp, sizeof stamp, "%Y-%m-%d %H:%M:%S", &local);
  std::snprintf(stamp + n, sizeof stamp - n, ".%03ld [%s] %d", ts.tv_nsec / 1'000'000, to_string(l),
                static_cast<int>(getpid()));

  std::string line;
  line.reserve(std::strlen(stamp) + tag_.size() + message.size() + block.size() + 8);
  line.append(stamp);
  if (!tag_.empty()) line.append(" ").append(tag_);
  line.append(": ");
  append_log_escaped(line, message);
  while (!block.empty()) {
    std::size_t nl = block.find('\n');
    line.push_back('\n');
    append_log_escaped(line, block.substr(0, nl));
    block.remove_prefix(nl == std::string_view::npos ? block.size() : nl + 1);
  }
  line.push_back('\n');

  write_line(fd(), line);
}

} // namespace process_manager
