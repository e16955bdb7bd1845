#include "process_manager/log.hpp"

#include <cstdlib>
#include <doctest/doctest.h>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>

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
