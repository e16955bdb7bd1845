#include "process_manager/log.hpp"

#include <cstdlib>
#include <doctest/doctest.h>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

using namespace process_manager;

TEST_CASE("log: level names round trip") {
  LogLevel l = LogLevel::Debug;
  CHECK(parse_log_level("error", l));
  CHECK(l == LogLevel::Error);
  CHECK(parse_log_level("warning", l));
  CHECK(l == LogLevel::Warn);
  CHECK_FALSE(parse_log_level("loud", l));
  CHECK(std::string(to_string(LogLevel::Notice)) == "notice");
}

TEST_CASE("log: whole lines with level and pid, to a file, reopened after rotation") {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("pm-log-" + std::to_string(getpid()));
  Log& log = Log::get();
  LogLevel saved = log.level();
  log.open(path.string());
  log.set_level(LogLevel::Warn);
  PM_LOG(LogLevel::Info, "hidden");
  PM_LOG(LogLevel::Warn, "first");
  std::filesystem::rename(path, path.string() + ".1");
  log.reopen();
  PM_LOG(LogLevel::Error, "second");
  log.open(""); // back to stderr
  log.set_level(saved);

  std::string rotated, line;
  std::getline(std::ifstream(path.string() + ".1"), rotated);
  std::getline(std::ifstream(path), line);
  CHECK(rotated.find(" [warn] " + std::to_string(getpid()) + ": first") != std::string::npos);
  CHECK(rotated.size() > 24); // "YYYY-MM-DD HH:MM:SS.mmm " first
  CHECK(line.find("[error]") != std::string::npos);
  CHECK(line.find("second") != std::string::npos);
  std::filesystem::remove(path);
  std::filesystem::remove(path.string() + ".1");
}

TEST_CASE("log: a file that cannot be opened names the path") {
  try {
    Log::get().open("/nonexistent-dir/x.log");
    FAIL("no exception");
  } catch (const std::system_error& e) {
    CHECK(std::string(e.what()).find("/nonexistent-dir/x.log") != std::string::npos);
  }
  CHECK(Log::get().fd() == 2);
}

// The error log and the access log share this file (log_file.hpp): one rule for a failed reopen.
TEST_CASE("log file: a reopen that fails keeps writing to the old file") {
  namespace fs = std::filesystem;
  fs::path dir = fs::temp_directory_path() / ("pm-logfile-" + std::to_string(getpid()));
  fs::create_directory(dir);
  LogFile file;
  file.open((dir / "a.log").string());
  int fd = file.fd();
  // Rotation whose new file cannot be made: the directory itself moved away.
  fs::path moved = dir.string() + ".moved";
  fs::rename(dir, moved);
  std::string why;
  CHECK_FALSE(file.reopen(why));
  CHECK(why.find((dir / "a.log").string()) != std::string::npos);
  CHECK(file.fd() == fd);
  write_line(file.fd(), "kept\n");
  file.close();
  std::string line;
  std::getline(std::ifstream(moved / "a.log"), line);
  CHECK(line == "kept");
  fs::remove_all(moved);
}

// Request data reaches the log (a URI in a crash line, a handler's exception text, a worker's
// stderr): one rule in the writer keeps every record on one line, whatever the text holds.
TEST_CASE("log: control bytes in a message are escaped, a newline never starts a line") {
  CHECK(log_escaped("GET /a\n2026-01-01 00:00:00.000 [alert] 1: forged") ==
        "GET /a\\x0a2026-01-01 00:00:00.000 [alert] 1: forged");
  CHECK(log_escaped("a\rb\tc\x1b[31md\x7f") == "a\\x0db\\x09c\\x1b[31md\\x7f");
  CHECK(log_escaped(std::string_view("nul\0end", 7)) == "nul\\x00end");
  CHECK(log_escaped("caf\xc3\xa9 ok") == "caf\xc3\xa9 ok"); // UTF-8 is kept

  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("pm-log-escape-" + std::to_string(getpid()));
  Log& log = Log::get();
  log.open(path.string());
  PM_LOG(LogLevel::Error, "uri /x\n[alert] forged\r");
  PM_LOG_BLOCK(LogLevel::Error, "crashed:", "  request \"GET /y\x1b\"\n  #0 frame");
  log.open("");
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  REQUIRE(lines.size() == 4);
  CHECK(lines[0].ends_with(": uri /x\\x0a[alert] forged\\x0d"));
  CHECK(lines[1].ends_with(": crashed:"));
  CHECK(lines[2] == "  request \"GET /y\\x1b\"");
  CHECK(lines[3] == "  #0 frame");
  std::filesystem::remove(path);
}
