#pragma once
// A small levelled logger: whole lines written with one write(2), so lines from the master and
// the workers never interleave mid-line. Never called from a signal handler. Disabled levels cost
// one comparison: format only after `enabled()`.
#include <string>
#include <string_view>

namespace process_manager {

enum class LogLevel { Debug = 0, Info, Notice, Warn, Error, Alert };

const char* to_string(LogLevel l);
bool parse_log_level(std::string_view text, LogLevel& out);

class Log {
public:
  // The process-wide logger (stderr at Notice until configured).
  static Log& get();

  // Logs to `path` (appended, created 0640) or, when empty, to stderr. Throws std::system_error
  // naming the path when it cannot be opened.
  void open(const std::string& path);
  // USR1: reopen the same path (after rotation); stderr is left alone.
  void reopen();
  void set_level(LogLevel l) { level_ = l; }
  LogLevel level() const { return level_; }
  bool enabled(LogLevel l) const { return l >= level_; }
  int fd() const { return fd_; }
  // A worker whose stderr the master captures keeps logging to (a copy of) the original stderr.
  void keep_stderr(int fd) {
    if (path_.empty()) fd_ = fd;
  }

  // A word after the pid on every line ("[api]": the pool this process serves).
  void set_tag(std::string tag) { tag_ = std::move(tag); }

  // Writes "2026-11-30 10:00:00.123 [warn] 1234: message\n" ("1234 [api]: " with a tag).
  void write(LogLevel l, std::string_view message);

private:
  Log() = default;
  int fd_ = 2;
  std::string path_;
  std::string tag_;
  LogLevel level_ = LogLevel::Notice;
};

// Convenience: log at a level if enabled, formatting with std::format-like concatenation done by
// the caller only when enabled.
#define PM_LOG(level, expr)                                                                        \
  do {                                                                                             \
    auto& pm_log_ = ::process_manager::Log::get();                                                 \
    if (pm_log_.enabled(level)) pm_log_.write(level, (expr));                                      \
  } while (0)

} // namespace process_manager
