#pragma once
// doctest checks shared by the integration tests.
#include "harness.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <string>

namespace it {

// Fixture plugins (tests/fixtures/CMakeLists.txt): one that crashes as its path says, and one that
// tries what --sandbox refuses.
inline const std::string kCrashPlugin = FCGI_TEST_CRASH_PLUGIN;
inline const std::string kSandboxPlugin = FCGI_TEST_SANDBOX_PLUGIN;
// Work after the response and between requests (Response::finish(), on_idle()).
inline const std::string kAfterResponsePlugin = FCGI_TEST_AFTER_RESPONSE_PLUGIN;

// The master's exit codes as the README publishes them: the tests hold the binary to the table.
inline constexpr int kExitUsage = 2;          // bad option, bad config file
inline constexpr int kExitStartupFailure = 3; // listen socket, pidfile, privileges

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

// A normal request on a fresh connection, answered 200 (CHECKed); returns its latency in seconds.
inline double timed_request(const HostProcess& host, const std::string& uri) {
  auto start = std::chrono::steady_clock::now();
  fcgi_test::Client c = host.connect(Millis{5000});
  fcgi_test::Response r = c.request("GET", uri);
  double took = test_support::elapsed_s(start);
  CHECK(r.ended);
  CHECK(r.status == 200);
  return took;
}

// A process's resident memory (VmRSS, kB); -1 when it is gone.
inline long rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line))
    if (line.starts_with("VmRSS:")) return std::atol(line.c_str() + 6);
  return -1;
}

// Sets an environment variable for the scope of one host start (the child inherits it).
class ScopedEnv {
public:
  ScopedEnv(const char* name, const std::string& value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value.c_str(), 1);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

private:
  const char* name_;
  std::optional<std::string> old_;
};

} // namespace it
