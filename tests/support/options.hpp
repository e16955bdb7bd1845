#pragma once
// A command line for a case: the suite's base options, with a case's own (name, value) pairs
// replacing an option of the same name or added at the end.
#include <algorithm>
#include <string>
#include <vector>

namespace test_support {

inline std::vector<std::string> with_options(std::vector<std::string> args,
                                             const std::vector<std::string>& overrides) {
  for (std::size_t i = 0; i + 1 < overrides.size(); i += 2) {
    auto it = std::find(args.begin(), args.end(), overrides[i]);
    if (it != args.end() && it + 1 != args.end()) {
      *(it + 1) = overrides[i + 1];
    } else {
      args.push_back(overrides[i]);
      args.push_back(overrides[i + 1]);
    }
  }
  return args;
}

} // namespace test_support
