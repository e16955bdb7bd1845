#pragma once
// A count and its noun for a log line: "1 worker", "2 workers".
#include <string>
#include <string_view>

namespace process_manager {

inline std::string count_text(unsigned long n, std::string_view one, std::string_view many) {
  return std::to_string(n) + " " + std::string(n == 1 ? one : many);
}

} // namespace process_manager
