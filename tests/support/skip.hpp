#pragma once
// A test that cannot run here (a front server or php-cgi not installed, no cgroup v2 to write)
// says so in one line that CTest reads as SKIPPED, never as passed: tests/CMakeLists.txt gives
// every case SKIP_REGULAR_EXPRESSION "^SKIPPED: ", and scripts/test.sh lists the skipped cases
// at its end. Print it, then return from the test case:
//   if (!installed) return test_support::skip("lighttpd is not installed (scripts/test.sh installs
//   it)");
#include <iostream>
#include <string>

namespace test_support {

inline void skip(const std::string& why) {
  std::cout << "SKIPPED: " << why << std::endl;
}

} // namespace test_support
