// Memory after a large request: a worker that served one 8 MiB echo (8 MiB in, 8 MiB out) gives
// the memory back: its RSS returns near what it was before (it stayed ~17 MiB higher).
#include "checks.hpp"
#include "support/proc.hpp"

#include <cstdlib>
#include <fstream>

using fcgi_test::Millis;
using it::HostProcess;
using test_support::rss_kib;

namespace {

// Under AddressSanitizer freed memory waits in a quarantine first: none for this host, so that
// what it frees is freed at once, as without the sanitizer.
class NoQuarantine {
public:
  NoQuarantine() {
    const char* old = std::getenv("ASAN_OPTIONS");
    if (old) saved_ = old;
    had_ = old != nullptr;
    std::string opts = saved_.empty() ? "" : saved_ + ":";
    ::setenv("ASAN_OPTIONS", (opts + "quarantine_size_mb=0").c_str(), 1);
  }
  ~NoQuarantine() {
    if (had_)
      ::setenv("ASAN_OPTIONS", saved_.c_str(), 1);
    else
      ::unsetenv("ASAN_OPTIONS");
  }

private:
  std::string saved_;
  bool had_ = false;
};

} // namespace

TEST_SUITE("memory") {

  TEST_CASE("after one 8 MiB echo the worker's RSS returns near its value before") {
    std::optional<HostProcess> host;
    {
      NoQuarantine no_quarantine;
      host.emplace(std::vector<std::string>{"--app", "echo", "--workers", "1"});
    }
    std::vector<pid_t> workers = host->wait_workers(1);
    REQUIRE(workers.size() == 1);
    // A small request first: what every request needs is allocated by then.
    CHECK(host->connect().request("POST", "/echo", std::string(1000, 'a')).status == 200);
    long before = rss_kib(workers[0]);
    fcgi_test::Request big;
    big.method = "POST";
    big.uri = "/echo";
    big.body.assign(8u << 20, 'b');
    fcgi_test::Response r = host->connect().request(big);
    CHECK(r.status == 200);
    CHECK(r.body.size() > big.body.size());
    CHECK(host->connect().request("POST", "/echo", std::string(1000, 'a')).status == 200);
    long after = rss_kib(workers[0]);
    INFO("VmRSS before " << before << " kB, after " << after << " kB");
    REQUIRE(before > 0);
    CHECK(after < before + 4096);
  }
}
