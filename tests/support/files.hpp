#pragma once
// Reading files, picking lines out of logs, and temporary directories.
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

namespace test_support {

// A mkdtemp() template under $TMPDIR (the scratch directory tests/doctest_main.cpp gives every
// case, removed after it) or /tmp: "$TMPDIR/name-XXXXXX".
inline std::string temp_template(const std::string& name) {
  const char* tmp = std::getenv("TMPDIR");
  return std::string(tmp && *tmp == '/' ? tmp : "/tmp") + "/" + name + "-XXXXXX";
}

// A fresh directory from mkdtemp(temp_template(name)), removed with its contents on destruction.
class TempDir {
public:
  explicit TempDir(const std::string& name = "fcgi-test") : path_(temp_template(name)) {
    if (!::mkdtemp(path_.data()))
      throw std::runtime_error("mkdtemp(\"" + path_ + "\") failed: " + std::strerror(errno));
  }
  ~TempDir() {
    std::error_code ignored; // a test that failed half-way may leave anything behind
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  // path()/name; `name` may hold directories.
  std::string file(const std::string& name) const { return path_ + "/" + name; }
  // Writes `content` to file(name), making its directories, and returns that path.
  std::string write(const std::string& name, const std::string& content) const {
    std::string p = file(name);
    std::filesystem::create_directories(std::filesystem::path(p).parent_path());
    std::ofstream out(p, std::ios::binary);
    out << content;
    if (!out) throw std::runtime_error("cannot write " + p);
    return p;
  }

private:
  std::string path_;
};

// The whole file; "" when it is missing.
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Lines of `text` in which `pattern` (ECMAScript regex) matches somewhere.
inline std::vector<std::string> matching_lines(const std::string& text,
                                               const std::string& pattern) {
  std::regex re(pattern);
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (std::regex_search(line, re)) out.push_back(line);
  return out;
}

// Lines of `text` that hold `needle` as it is (no regex).
inline std::vector<std::string> lines_with(const std::string& text, const std::string& needle) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    if (line.find(needle) != std::string::npos) out.push_back(line);
  return out;
}

} // namespace test_support
