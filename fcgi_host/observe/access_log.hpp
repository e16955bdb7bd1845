#pragma once
// --access-log FILE and --access-format: one line per request, written by the worker that served
// it with one write(2) on an O_APPEND descriptor, so lines of different workers never mix. The
// format is parsed once; a line is built in a buffer the worker reuses (no allocation once it has
// grown), and %t formats the time only once per second. USR1 reopens the file (after rotation)
// in the master, which hands the new descriptor to every worker (log_handover.hpp); each swaps
// it in with dup3 so no line is lost.
#include "app/request.hpp"
#include "app/response.hpp"
#include "fcgi_host/config/option_table.hpp"
#include "process_manager/log_file.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace fcgi_host {

inline constexpr std::string_view kDefaultAccessFormat = find_option("access-format")->default_text;

// Checks a format: every '%' starts a known token. False and `why` otherwise.
bool valid_access_format(std::string_view format, std::string& why);

class AccessLog {
public:
  static AccessLog& get();

  // In the master, before the first fork (workers inherit the descriptor). Throws
  // std::system_error naming the file, std::invalid_argument for a bad format.
  void open(const std::string& path, std::string_view format);
  void reopen();
  // A worker: the file the master reopened for it (LogFile::adopt).
  void adopt(int fd) { file_.adopt(fd); }
  // The descriptor the master hands its workers after a reopen; -1 when not logging.
  int fd() const { return file_.fd(); }
  bool enabled() const { return file_.is_open(); }

  struct Entry {
    std::string_view remote_addr, method, uri;
    int status = 0;
    std::uint64_t duration_ns = 0;
    std::int64_t cpu_ns = -1;     // -1: not sampled
    std::int64_t body_bytes = -1; // -1: streamed, not counted
    pid_t pid = 0;
    std::size_t slot = 0;
    std::uint32_t generation = 0;
    std::int64_t queue_ns = -1; // -1: the request carried no arrival stamp
    // For %I (request id), %{NAME}e (a parameter) and %{Name}o (a response header).
    const app::Request* request = nullptr;
    const app::Response* response = nullptr;
  };
  void write(const Entry& e);

  // The line write() would append, without the newline (for tests).
  const std::string& format_line(const Entry& e);

private:
  AccessLog() = default;
  struct Token {
    char kind;        // 0: literal text, else the letter after '%' (or after "%{NAME}")
    std::string text; // the literal text, or NAME
  };
  void append_time();

  process_manager::LogFile file_;
  std::vector<Token> tokens_;
  std::string line_;
  std::int64_t time_second_ = -1;
  std::string time_text_;
};

} // namespace fcgi_host
