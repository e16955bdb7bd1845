#pragma once
// An append-only log file, as the error log (Log) and the access log (AccessLog) both keep one:
// opened O_APPEND | O_CREAT 0640, never through a symbolic link, only a regular file of this
// user's in a directory nobody else can write (path_checks.hpp); reopened after rotation (USR1)
// by dup3 over the same descriptor, so its number stays valid for every copy taken of it; and
// written one whole line per write(2), so lines of the master and the workers never interleave
// mid-line.
#include <string>
#include <string_view>

namespace process_manager {

class LogFile {
public:
  LogFile() = default;
  ~LogFile() { close(); }
  LogFile(const LogFile&) = delete;
  LogFile& operator=(const LogFile&) = delete;

  // Opens `path` in place of the current file. Throws std::system_error naming the path (the
  // current file stays open then).
  void open(const std::string& path);
  void close();
  // The same path again, after rotation. False with `why` when it cannot be opened: the old file
  // stays open and gets the lines, rather than losing them.
  bool reopen(std::string& why);
  // A worker after rotation: `fd` (the file the master opened again, log_handover.hpp) takes the
  // place of the current one, by dup3 over the same number. `fd` is closed; ignored when this
  // log is not open.
  void adopt(int fd);

  bool is_open() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }

private:
  int fd_ = -1;
  std::string path_;
};

// Writes `line` (which ends in '\n') with one write(2), looping only on a short write. A failed
// write is dropped: there is nowhere left to report it.
void write_line(int fd, std::string_view line);

} // namespace process_manager
