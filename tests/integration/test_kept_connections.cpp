// Kept connections that move (handoff.hpp): through a real nginx with upstream keep-alive, a
// request nginx sends on a connection parked at a worker busy in a slow handler is answered by
// another worker; reloads, a binary upgrade and recycling under POST load with slow requests
// lose nothing.
#include "checks.hpp"
#include "lifecycle_load.hpp"

#include <csignal>
#include <future>

using fcgi_test::Millis;
using it::HostProcess;
using Clock = std::chrono::steady_clock;

namespace {

// The workers' counts of kept connections handed to another worker, from the status page.
std::size_t handed_off(HostProcess& host) {
  fcgi_test::Client c = host.connect();
  fcgi_test::Response r = c.request("GET", "/fcgi-status?json");
  const std::string key = "\"handed off conn\":";
  std::size_t at = r.body.find(key);
  if (at == std::string::npos) return 0;
  return std::strtoul(r.body.c_str() + at + key.size(), nullptr, 10);
}

// Two kept connections from nginx, both held by one worker, and a second worker free beside
// it: started with one worker, nginx opens two upstream connections to it for two concurrent
// requests and keeps both; then TTIN adds the second worker.
struct TwoKeptOnOneWorker {
  HostProcess host;
  it::NginxProcess nginx;
  explicit TwoKeptOnOneWorker(const std::string& handoff_after)
      : host([&] {
          it::HostOptions o;
          o.args = {"--app",           "echo",        "--workers",     "1",
                    "--handoff-after", handoff_after, "--status-path", "/fcgi-status"};
          o.status_socket = true;
          return o;
        }()),
        nginx([&] {
          it::NginxOptions o{host.address()};
          o.upstream_keepalive = 4;
          return o;
        }()) {
    auto a = std::async(std::launch::async, [this] {
      return it::http_request(nginx.port(), "GET", "/echo?delay_ms=200").status;
    });
    auto b = std::async(std::launch::async, [this] {
      return it::http_request(nginx.port(), "GET", "/echo?delay_ms=200").status;
    });
    REQUIRE(a.get() == 200);
    REQUIRE(b.get() == 200);
    host.signal(SIGTTIN);
    REQUIRE(host.wait_workers(2).size() == 2);
    REQUIRE(wait_status("\"idle processes\":2")); // the new worker waits in its loop
  }
  // Until the status page (asked on a connection of its own, straight to the host: through
  // nginx it would take one of the kept connections) says `what`.
  bool wait_status(const std::string& what) {
    std::string last;
    bool seen = it::wait_for(
        [&] {
          fcgi_test::Client c = host.connect();
          last = c.request("GET", "/fcgi-status?json").body;
          return last.find(what) != std::string::npos;
        },
        Millis{10000});
    if (!seen) MESSAGE("status page: " << last << "\nhost log:\n" << host.log());
    return seen;
  }
  // Until one worker runs a request.
  bool wait_busy() { return wait_status("\"active processes\":1"); }
};

} // namespace

TEST_SUITE("kept connections") {

  TEST_CASE("a request on a kept connection is answered while its worker runs a slow handler") {
    TwoKeptOnOneWorker setup("0.002");
    int port = setup.nginx.port();
    // The slow request takes one of the kept connections; the fast one goes on the other, which
    // nginx finds idle in its cache: at the same worker, busy for 3 s.
    auto slow = std::async(std::launch::async, [port] {
      return it::http_request(port, "GET", "/echo?delay_ms=3000", {}, Millis{10000}).status;
    });
    REQUIRE(setup.wait_busy());
    auto start = Clock::now();
    it::HttpResponse fast = it::http_request(port, "GET", "/echo?fast=1", {}, Millis{10000});
    double took = test_support::elapsed_s(start);
    MESSAGE("fast request beside a 3 s request on a kept connection: " << took << " s");
    CHECK(fast.status == 200);
    CHECK(took < 1.0);
    CHECK(slow.get() == 200);
    CHECK(handed_off(setup.host) >= 1);
    INFO("nginx: " << setup.nginx.error_log());
    CHECK(setup.nginx.error_log().find("failed") == std::string::npos);
    it::check_no_alerts(setup.host);
  }

  TEST_CASE("without handoff the same request waits for the slow handler (the control case)") {
    TwoKeptOnOneWorker setup("0");
    int port = setup.nginx.port();
    auto slow = std::async(std::launch::async, [port] {
      return it::http_request(port, "GET", "/echo?delay_ms=1500", {}, Millis{10000}).status;
    });
    REQUIRE(setup.wait_busy());
    auto start = Clock::now();
    it::HttpResponse fast = it::http_request(port, "GET", "/echo?fast=1", {}, Millis{10000});
    double took = test_support::elapsed_s(start);
    CHECK(fast.status == 200);
    CHECK(took > 0.5); // parked at the busy worker
    CHECK(slow.get() == 200);
    CHECK(handed_off(setup.host) == 0);
  }

  TEST_CASE("20 HUPs and a USR2 under POST load with slow requests, through nginx keep-alive: "
            "0 lost, no reset in nginx's log") {
    HostProcess host({"--app", "echo", "--workers", "4", "--pidfile", "{dir}/host.pid"});
    it::NginxOptions options{host.address()};
    options.upstream_keepalive = 32;
    it::NginxProcess nginx(options);
    std::string body(2048, 'p');
    it::HttpLoad load(nginx.port(), "/echo?load=1", 4, 100'000, body);
    it::HttpLoad slow(nginx.port(), "/echo?delay_ms=300", 1, 1'000, body);
    auto ready_lines = [&] { return it::lines_with(host.log(), "ready; retiring").size(); };
    for (int i = 0; i < 20; ++i) {
      std::size_t before = ready_lines();
      host.signal(SIGHUP);
      CHECK(it::wait_for([&] { return ready_lines() > before; }, Millis{10000}));
    }
    host.signal(SIGUSR2);
    CHECK(host.wait_exit(Millis{15000}).value_or(-1) == 0);
    pid_t new_master = it::read_pid(host.dir().file("host.pid"));
    std::size_t seen = load.samples().size();
    (void)seen;
    load.stop();
    slow.stop();
    MESSAGE("20 HUPs + USR2, POST 2 KiB, keep-alive 32: "
            << load.samples().size() << " fast and " << slow.samples().size()
            << " slow requests; failures " << load.failures() << " + " << slow.failures());
    std::string errors = nginx.error_log();
    INFO("first error: " << load.first_error() << slow.first_error() << "\nnginx: " << errors);
    CHECK(load.samples().size() > 100);
    CHECK(slow.samples().size() > 3);
    CHECK(load.failures() == 0);
    CHECK(slow.failures() == 0);
    CHECK(errors.find("recv() failed") == std::string::npos);
    CHECK(errors.find("writev() failed") == std::string::npos);
    CHECK(errors.find("prematurely closed") == std::string::npos);
    if (new_master > 0 && it::process_alive(new_master)) ::kill(new_master, SIGTERM);
    CHECK(it::wait_for([&] { return !it::process_alive(new_master); }, Millis{10000}));
  }

  TEST_CASE("--max-requests 100 holds on kept connections, recycling under POST load loses "
            "nothing") {
    HostProcess host({"--app", "echo", "--workers", "2", "--max-requests", "100",
                      "--max-requests-jitter", "20"});
    it::NginxOptions options{host.address()};
    options.upstream_keepalive = 32;
    it::NginxProcess nginx(options);
    std::string body(2048, 'p');
    it::HttpLoad load(nginx.port(), "/echo?load=1", 3, 2'000, body);
    it::HttpLoad slow(nginx.port(), "/echo?delay_ms=100", 1, 20, body);
    auto recyclings = [&] { return it::lines_with(host.log(), "worker recycling").size(); };
    it::wait_for([&] { return recyclings() >= 10; }, Millis{30000});
    load.stop();
    slow.stop();
    std::size_t served = load.samples().size() + slow.samples().size();
    std::size_t recycled = recyclings();
    MESSAGE("max-requests 100+0..20, keep-alive: "
            << served << " requests, " << recycled << " recyclings, "
            << load.failures() + slow.failures() << " failures");
    std::string errors = nginx.error_log();
    INFO("first error: " << load.first_error() << "\nnginx: " << errors);
    // Every worker goes within 120 requests: the whole pool's share of `served` is bounded.
    CHECK(recycled + 2 >= served / 120);
    CHECK(recycled >= 10);
    CHECK(load.failures() == 0);
    CHECK(slow.failures() == 0);
    CHECK(errors.find("recv() failed") == std::string::npos);
    CHECK(errors.find("writev() failed") == std::string::npos);
    it::check_no_alerts(host);
  }
}
