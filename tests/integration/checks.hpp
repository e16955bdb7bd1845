#pragma once
// doctest checks shared by the integration tests.
#include "harness.hpp"

#include <doctest/doctest.h>

namespace it {

// The host never logs at [alert] in a healthy run (alert is for "a person must look at this").
// Checked at any point of a test; the harness checks the whole log again in its teardown.
inline void check_no_alerts(const HostProcess& host) {
  auto alerts = alarming_lines(host.log());
  INFO("host log:\n" << host.log());
  CHECK(alerts.empty());
}

// A body that is large, not repetitive, and contains every byte value (\0, \r, \n included).
inline std::string pattern_body(std::size_t size) {
  std::string s(size, '\0');
  std::uint32_t x = 2463534242u;
  for (auto& c : s) {
    x ^= x << 13, x ^= x >> 17, x ^= x << 5; // xorshift32
    c = static_cast<char>(x & 0xff);
  }
  return s;
}

inline bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

} // namespace it
