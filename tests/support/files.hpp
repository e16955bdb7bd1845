#pragma once
// Reading files, picking lines out of logs, and naming temporary directories.
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace test_support {

// A mkdtemp() template under $TMPDIR (the scratch directory tests/doctest_main.cpp gives every
// case, removed after it) or /tmp: "$TMPDIR/name-XXXXXX".
inline std::string temp_template(const std::string& name) {
  const char* tmp = std::getenv("TMPDIR");
  return std::string(tmp && *tmp == '/' ? tmp : "/tmp") + "/" + name + "-XXXXXX";
}

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
