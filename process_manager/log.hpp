#pragma once
// A small levelled logger: whole lines written with one write(2), so lines from the master and
// the workers never interleave mid-line. Never called from a signal handler. Disabled levels cost
// one comparison: format only after `enabled()`.
#include "process_manager/log_file.hpp"

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
  // A worker: the file the master reopened for it (LogFile::adopt).
  void adopt(int fd) { file_.adopt(fd); }
  void set_level(LogLevel l) { level_ = l; }
  LogLevel level() const { return level_; }
  bool enabled(LogLevel l) const { return l >= level_; }
  int fd() const { return file_.is_open() ? file_.fd() : stderr_fd_; }
  // The --error-log file's descriptor, handed to the workers after a reopen; -1 on stderr.
  int file_fd() const { return file_.fd(); }
  // A worker whose stderr the master captures keeps logging to (a copy of) the original stderr.
  void keep_stderr(int fd) { stderr_fd_ = fd; }

  // A word after the pid on every line ("[api]": the pool this process serves).
  void set_tag(std::string tag) { tag_ = std::move(tag); }

  // Writes "2026-11-30 10:00:00.123 [warn] 1234: message\n" ("1234 [api]: " with a tag).
  // Control bytes in `message` are written as \xNN (append_log_escaped): a message may carry
  // request data, and a newline in it must never start a line of its own. A `block` (a crash's
  // request and stack) follows on lines of its own: split at its newlines, each line escaped.
  void write(LogLevel l, std::string_view message, std::string_view block = {});

private:
  Log() = default;
  LogFile file_; // --error-log; closed: stderr
  int stderr_fd_ = 2;
  std::string tag_;
  LogLevel level_ = LogLevel::Notice;
};

// The log's one rule for text it did not write itself: every byte below 0x20 and 0x7F (DEL) is
// appended as \xNN, so a request's newline, carriage return or terminal escape cannot forge or
// split a line. Bytes from 0x80 up (UTF-8) are kept.
void append_log_escaped(std::string& out, std::string_view text);
std::string log_escaped(std::string_view text);

// Convenience: log at a level if enabled, formatting with std::format-like concatenation done by
// the caller only when enabled.
#define PM_LOG(level, expr)                                                                        \
  do {                                                                                             \
    auto& pm_log_ = ::process_manager::Log::get();                                                 \
    if (pm_log_.enabled(level)) pm_log_.write(level, (expr));                                      \
  } while (0)

// The same with a block of lines after the message (Log::write).
#define PM_LOG_BLOCK(level, message, block)                                                        \
  do {                                                                                             \
    auto& pm_log_ = ::process_manager::Log::get();                                                 \
    if (pm_log_.enabled(level)) pm_log_.write(level, (message), (block));                          \
  } while (0)

} // namespace process_manager
