// Kept connections that move (handoff_channel.hpp): through a real nginx with upstream keep-alive,
// a request nginx sends on a connection parked at a worker busy in a slow handler is answered by
// another worker, also when that worker is retired; 5 binary upgrades in a row, 20 reloads and
// recycling under POST load with 2 s requests lose nothing and leave no reset in nginx's log.
#include "checks.hpp"
#include "lifecycle_load.hpp"
#include "support/time.hpp"

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
  // Until the master's status page says `what`. (Not the workers' --status-path: a worker that
  // accepted the question just before it took the slow request answers it only after that
  // request, never seeing it run; and through nginx it would take one of the kept connections.)
  bool wait_status(const std::string& what) {
    bool seen = !host.wait_status([&](const std::string& json) { return it::has(json, what); },
                                  Millis{10000})
                     .empty();
    if (!seen) MESSAGE("status page: " << host.status_json() << "\nhost log:\n" << host.log());
    return seen;
  }
  // Until one worker runs a request.
  bool wait_busy() { return wait_status("\"active processes\":1"); }
};

// POST load (2 KiB bodies) through nginx with 32 kept upstream connections, 4 workers: 16
// threads of fast requests and 2 of 2 s requests (fewer than the workers: they would hold them
// all), so that a lifecycle event always finds slow handlers running beside kept connections
// parked at their workers.
struct KeptLoad {
  HostProcess host;
  it::NginxProcess nginx;
  std::string body = std::string(2048, 'p');
  std::size_t slow_threads_;
  it::HttpLoad load;
  it::HttpLoad slow;
  explicit KeptLoad(std::vector<std::string> extra, const char* workers = "4", int slow_threads = 2)
      : host([&] {
          std::vector<std::string> args = {"--app", "echo",          "--workers",
                                           workers, "--status-path", "/fcgi-status"};
          args.insert(args.end(), extra.begin(), extra.end());
          it::HostOptions o;
          o.args = args;
          return o;
        }()),
        nginx([&] {
          it::NginxOptions o{host.address()};
          o.upstream_keepalive = 32;
          return o;
        }()),
        slow_threads_(static_cast<std::size_t>(slow_threads)),
        load(nginx.port(), "/echo?load=1", 16, 300'000, body),
        slow(nginx.port(), "/echo?delay_ms=2000", slow_threads, 1'000, body) {
    REQUIRE(load.wait_more(50));
  }
  // Until a 2 s request runs in some worker of the current master (its status page, asked
  // straight at the host: an entry keeps its last URI when idle, so the state must say so).
  bool slow_in_flight() {
    const std::string handling = "\"state\":\"handling\"";
    return it::wait_for(
        [&] {
          std::string json;
          try {
            json = host.connect().request("GET", "/fcgi-status?json&full").body;
          } catch (const std::exception&) {
            return false;
          }
          for (auto at = json.find(handling); at != std::string::npos;
               at = json.find(handling, at + 1))
            if (json.substr(at, json.find('}', at) - at).find("delay_ms=2000") != std::string::npos)
              return true;
          return false;
        },
        Millis{10000});
  }
  void finish(const char* what) {
    load.stop();
    slow.stop();
    MESSAGE(std::string(what) << ", POST 2 KiB, keep-alive 32: " << load.samples().size()
                              << " fast and " << slow.samples().size() << " 2 s requests; failures "
                              << load.failures() << " + " << slow.failures());
    std::string errors = nginx.error_log();
    INFO("first error: " << load.first_error() << slow.first_error() << "\nnginx: " << errors);
    CHECK(load.samples().size() > 100);
    CHECK(slow.samples().size() >= slow_threads_);
    CHECK(load.failures() == 0);
    CHECK(slow.failures() == 0);
    CHECK(errors.find("recv() failed") == std::string::npos);
    CHECK(errors.find("writev() failed") == std::string::npos);
    CHECK(errors.find("reset") == std::string::npos);
    CHECK(errors.find("prematurely closed") == std::string::npos);
  }
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

  TEST_CASE("a worker retired inside a slow handler passes its kept connections at once: a "
            "request nginx sends on one is answered by the new generation") {
    // --handoff-after 60: the slow handler's own nudge does not come; the retirement's does.
    TwoKeptOnOneWorker setup("60");
    int port = setup.nginx.port();
    auto slow = std::async(std::launch::async, [port] {
      return it::http_request(port, "GET", "/echo?delay_ms=3000", {}, Millis{10000}).status;
    });
    REQUIRE(setup.wait_busy());
    setup.host.signal(SIGHUP);
    REQUIRE(setup.host.wait_log("ready; retiring", Millis{10000}));
    auto start = Clock::now();
    it::HttpResponse fast = it::http_request(port, "GET", "/echo?fast=1", {}, Millis{10000});
    double took = test_support::elapsed_s(start);
    MESSAGE("fast request on a kept connection of a worker retired in a 3 s handler: " << took
                                                                                       << " s");
    CHECK(fast.status == 200);
    CHECK(took < 1.5); // not after the slow handler
    CHECK(slow.get() == 200);
    CHECK(handed_off(setup.host) >= 1);
    INFO("nginx: " << setup.nginx.error_log());
    CHECK(setup.nginx.error_log().find("failed") == std::string::npos);
    it::check_no_alerts(setup.host);
  }

  TEST_CASE("5 USR2 upgrades in a row under POST load with 2 s requests, through nginx "
            "keep-alive: 0 lost, no reset in nginx's log") {
    // Four threads of 2 s requests: every upgrade finds a slow request in most old workers.
    KeptLoad run({"--pidfile", "{dir}/host.pid"}, "4", 4);
    pid_t master = run.host.pid();
    REQUIRE(run.slow_in_flight());
    for (int i = 0; i < 5; ++i) {
      // Each upgrade starts while 2 s requests run (four threads send them back to back), and
      // the next only once the old master is gone.
      auto start = Clock::now();
      if (i == 0) {
        run.host.signal(SIGUSR2);
        CHECK(run.host.wait_exit(Millis{20000}).value_or(-1) == 0);
      } else {
        ::kill(master, SIGUSR2);
        CHECK(it::wait_for([&] { return !it::process_alive(master); }, Millis{20000}));
      }
      pid_t next = it::read_pid(run.host.dir().file("host.pid"));
      REQUIRE(next > 0);
      REQUIRE(next != master);
      master = next;
      MESSAGE("upgrade " << i + 1 << ": old master gone after " << test_support::elapsed_s(start)
                         << " s");
    }
    run.finish("5 USR2");
    ::kill(master, SIGTERM);
    CHECK(it::wait_for([&] { return !it::process_alive(master); }, Millis{10000}));
  }

  TEST_CASE("20 HUPs under POST load with 2 s requests, through nginx keep-alive: 0 lost, no "
            "reset in nginx's log") {
    KeptLoad run({});
    auto ready_lines = [&] { return it::lines_with(run.host.log(), "ready; retiring").size(); };
    REQUIRE(run.slow_in_flight());
    for (int i = 0; i < 20; ++i) {
      // Every second reload waits for a 2 s request to end: its thread sends the next one to
      // the current generation, which that reload then retires with it running.
      if (i % 2 == 1)
        CHECK(it::wait_for([&] { return run.slow.completed() > static_cast<std::size_t>(i / 2); },
                           Millis{10000}));
      std::size_t before = ready_lines();
      run.host.signal(SIGHUP);
      CHECK(it::wait_for([&] { return ready_lines() > before; }, Millis{10000}));
      CHECK(run.load.wait_more(5));
    }
    run.finish("20 HUPs");
  }

  TEST_CASE("--max-requests recycling under POST load with 2 s requests, through nginx "
            "keep-alive: 0 lost, no reset in nginx's log, with 4 workers and with 1") {
    for (const char* workers : {"4", "1"}) {
      CAPTURE(workers);
      // One worker: no 2 s requests, which would hold it; its replacement takes the kept
      // connections from the channel.
      KeptLoad run({"--max-requests", "300", "--max-requests-jitter", "60"}, workers,
                   workers[0] == '1' ? 0 : 2);
      auto recyclings = [&] { return it::lines_with(run.host.log(), "worker recycling").size(); };
      CHECK(it::wait_for([&] { return recyclings() >= 12; }, Millis{30000}));
      std::size_t recycled = recyclings();
      std::size_t served = run.load.completed() + run.slow.completed();
      run.finish(workers[0] == '1' ? "recycling, 1 worker" : "recycling, 4 workers");
      // Every worker goes within 360 requests: the whole pool's share of `served` is bounded.
      CHECK(recycled + 4 >= served / 360);
      it::check_no_alerts(run.host);
    }
  }
}
