// A real nginx on a free loopback port in front of fcgi-host on a Unix socket.
#include "checks.hpp"

#include <atomic>
#include <mutex>
#include <thread>

using fcgi_test::Millis;
using it::HostProcess;
using it::NginxProcess;
using Clock = std::chrono::steady_clock;

namespace {

struct LoadResult {
  int done = 0;
  int errors = 0;
  std::string first_error;
};

// `total` GET / requests from `threads` clients, one connection each (Connection: close). A thread
// stops at its first error, and all stop at `budget`: a broken host fails fast, not in minutes.
LoadResult run_load(int port, int total, int threads, Millis budget) {
  std::atomic<int> next{0}, done{0}, errors{0};
  std::mutex m;
  std::string first_error;
  auto deadline = Clock::now() + budget;
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&] {
      while (next++ < total && Clock::now() < deadline) {
        std::string error;
        try {
          it::HttpResponse r = it::http_request(port, "GET", "/", {}, Millis{5000});
          if (r.status != 200 || r.body != "OK")
            error =
                "status " + std::to_string(r.status) + " body \"" + r.body.substr(0, 100) + "\"";
        } catch (const std::exception& e) {
          error = e.what();
        }
        if (error.empty()) {
          ++done;
          continue;
        }
        ++errors;
        std::lock_guard lock(m);
        if (first_error.empty()) first_error = error;
        return;
      }
    });
  for (auto& t : pool)
    t.join();
  return {done.load(), errors.load(), first_error};
}

void check_nginx_clean(const NginxProcess& nginx) {
  INFO("nginx error log:\n" << nginx.error_log());
  CHECK(it::lines_with(nginx.error_log(), "[error]").empty());
  CHECK(it::lines_with(nginx.error_log(), "[alert]").empty());
}

} // namespace

TEST_SUITE("nginx in front") {

  TEST_CASE("nginx → echo host: GET, 1 MiB POST, 404, 500, 413") {
    // The host's body limit is below nginx's (64m), so the 413 is the host's.
    HostProcess host({"--app", "echo", "--workers", "2", "--max-body", "2000000"});
    NginxProcess nginx({host.address()});

    it::HttpResponse get = it::http_request(nginx.port(), "GET", "/echo/hi?x=1");
    CHECK(get.status == 200);
    CHECK(get.body.find("uri=/echo/hi?x=1\n") != std::string::npos);
    CHECK(get.body.find("param SCRIPT_NAME=/echo/hi\n") != std::string::npos);
    CHECK(get.body.find("param REMOTE_ADDR=127.0.0.1\n") != std::string::npos);

    std::string body = it::pattern_body(1 << 20);
    it::HttpResponse post = it::http_request(nginx.port(), "POST", "/echo", body, Millis{20000});
    CHECK(post.status == 200);
    bool intact = it::ends_with(post.body, "\n\n" + body);
    CHECK(intact);

    CHECK(it::http_request(nginx.port(), "GET", "/not-found").status == 404);
    CHECK(it::http_request(nginx.port(), "GET", "/throw").status == 500);
    CHECK(it::http_request(nginx.port(), "POST", "/echo", std::string(3000000, 'x'), Millis{20000})
              .status == 413);
    // And still serving after all that.
    CHECK(it::http_request(nginx.port(), "GET", "/echo").status == 200);
    check_nginx_clean(nginx);
    it::check_no_alerts(host);
  }

  TEST_CASE("nginx → hello host: GET answers OK, then 10 000 requests from 4 clients, 0 errors") {
    HostProcess host({"--app", "hello", "--workers", "2"});
    NginxProcess nginx({host.address()});
    it::HttpResponse r = it::http_request(nginx.port(), "GET", "/");
    CHECK(r.status == 200);
    CHECK(r.body == "OK");
    LoadResult load = run_load(nginx.port(), 10000, 4, Millis{180000});
    INFO("first error: " << load.first_error);
    CHECK(load.errors == 0);
    CHECK(load.done == 10000);
    check_nginx_clean(nginx);
    it::check_no_alerts(host);
  }

  TEST_CASE("nginx with upstream keep-alive: kept connections never make requests wait") {
    // More kept upstream connections than workers: an idle kept connection must not pin a worker.
    HostProcess host({"--app", "hello", "--workers", "2"});
    NginxProcess nginx({host.address(), 8});
    LoadResult load = run_load(nginx.port(), 2000, 4, Millis{60000});
    INFO("first error: " << load.first_error);
    CHECK(load.errors == 0);
    CHECK(load.done == 2000);
    check_nginx_clean(nginx);
    it::check_no_alerts(host);
  }

} // TEST_SUITE
