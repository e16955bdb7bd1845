// Work after the response and between requests, through the real binary, in both modes of the
// request path (decision 25): a handler that calls Response::finish() and works on answers its
// client at once, its work completes, and its kept connection serves the next request as its
// mode allows; a crash after finish() leaves the client its 200 and the log one crash block that
// says so; on_idle() runs in a worker (each thread) idle for --idle-work-after.
#include "checks.hpp"
#include "request_modes.hpp"

#include <string>

using it::HostOptions;
using it::HostProcess;
using it::NginxProcess;
using test_support::Clock;
using test_support::elapsed_ms;

namespace {

// Occurrences of `needle` in `text`.
std::size_t after_response_count(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t at = text.find(needle); at != std::string::npos; at = text.find(needle, at + 1))
    ++n;
  return n;
}

// How often the worker's main thread (its loop) has gone to sleep and been woken: the
// voluntary context switches of /proc/PID/status (of the thread-group leader alone). -1 if gone.
long loop_wakeups(pid_t worker) {
  const std::string status = it::read_file("/proc/" + std::to_string(worker) + "/status");
  const std::string key = "voluntary_ctxt_switches:";
  const std::size_t at = status.find("\n" + key);
  return at == std::string::npos ? -1 : std::stol(status.substr(at + key.size() + 1));
}

HostOptions after_response_host(std::vector<std::string> extra) {
  HostOptions o;
  o.args = it::with_threads({"--app", it::kAfterResponsePlugin});
  o.args.insert(o.args.end(), extra.begin(), extra.end());
  o.status_socket = true;
  return o;
}

// On a kept connection of its own: GET /finish-then-work?ms=800 (answered at once), then GET
// /quick; how long the second took, in ms.
double after_response_next_ms(HostProcess& host) {
  host.allow_log("wrote or finished again after Response::finish\\(\\)");
  auto c = host.connect();
  c.set_keep_conn(true);
  CHECK(c.request("GET", "/finish-then-work?ms=800").body == "answered\n");
  const auto start = Clock::now();
  fcgi_test::Response next = c.request("GET", "/quick");
  const double ms = elapsed_ms(start);
  CHECK(next.status == 200);
  CHECK(next.body == "quick\n");
  return ms;
}

} // namespace

TEST_SUITE("work after the response") {
  REQUEST_PATH_CASE("finish() then 800 ms of work: the client has its answer in < 300 ms, "
                    "the work completes, the route keeps both times") {
    HostProcess host(after_response_host({"--workers", "2"}));
    host.expect_log("wrote or finished again after Response::finish\\(\\) on GET "
                    "/finish-then-work");
    NginxProcess nginx({host.address()});
    const auto start = Clock::now();
    it::HttpResponse r = it::http_request(nginx.port(), "GET", "/finish-then-work?ms=800");
    const double answered_ms = elapsed_ms(start);
    CHECK(r.status == 200);
    CHECK(r.body == "answered\n");
    INFO("answered after " << answered_ms << " ms");
    CHECK(answered_ms < 300);
    // The work goes on after the answer, with the request still readable, and ends.
    CHECK_FALSE(it::has(host.log(), "after-response work done"));
    REQUIRE(host.wait_log("after-response work done: id=[^ ]+ path=/finish-then-work late write "
                          "refused=1",
                          Millis{5000}));
    // Counted once the handler returned: the total holds the work, the response time does not.
    std::string page = host.wait_status(
        [](const std::string& json) { return it::has(json, "\"finished early\":1"); });
    INFO(page);
    REQUIRE_FALSE(page.empty());
    const std::size_t at = page.find("\"after response seconds\":");
    REQUIRE(at != std::string::npos);
    CHECK(std::stod(page.substr(at + 25)) >= 0.7);
    it::check_no_alerts(host);
  }

  REQUEST_PATH_CASE("after finish() the kept connection serves its next request at once: on "
                    "another thread, or with one thread on another worker") {
    HostProcess host(after_response_host({"--workers", "2"}));
    REQUIRE(host.wait_workers(2).size() == 2);
    // Both ready and waiting (a worker still starting is no free worker to pass it to).
    REQUIRE(!host.wait_status("idle processes", 2, Millis{10000}).empty());
    const double next_ms = after_response_next_ms(host);
    INFO("next answered after " << next_ms << " ms");
    CHECK(next_ms < 300);
    CHECK_FALSE(it::has(host.log(), "after-response work done"));
    if (it::request_path_threads() == 1) // the worker at work passed the connection on
      CHECK_FALSE(host.wait_status("handed off conn", 1).empty());
    REQUIRE(host.wait_log("after-response work done", Millis{5000}));
  }

  REQUEST_PATH_CASE("after finish() with no other worker free, the kept connection's next "
                    "request waits for the handler with one thread, and is served at once with "
                    "more") {
    HostProcess host(after_response_host({"--workers", "1"}));
    const double next_ms = after_response_next_ms(host);
    INFO("next answered after " << next_ms << " ms");
    if (it::request_path_threads() > 1) {
      CHECK(next_ms < 300);
      CHECK_FALSE(it::has(host.log(), "after-response work done"));
    } else {
      // The loop is the handler's until it returns: the next request waited for the work.
      CHECK(host.wait_log("after-response work done", Millis{1000}));
    }
    REQUIRE(host.wait_log("after-response work done", Millis{5000}));
  }

  REQUEST_PATH_CASE("a crash after finish(): the client has its 200, the log one crash block "
                    "naming the request and saying its response had been sent") {
    HostProcess host(after_response_host({"--workers", "1"}));
    NginxProcess nginx({host.address()});
    it::HttpResponse r = it::http_request(nginx.port(), "GET", "/finish-then-crash");
    CHECK(r.status == 200);
    CHECK(r.body == "answered\n");
    REQUIRE(host.wait_log("killed by signal 11", Millis{10000}));
    REQUIRE(host.wait_log("crash_after_response|after its response had been sent", Millis{10000}));
    const std::string log = host.log();
    INFO(log);
    CHECK(after_response_count(log, "killed by signal 11") == 1);
    CHECK(after_response_count(log, "\"GET /finish-then-crash\", route") == 1);
    CHECK(it::has(log, "after its response had been sent"));
    // The host serves on.
    CHECK(host.wait_workers(1, Millis{10000}).size() == 1);
    CHECK(it::http_request(nginx.port(), "GET", "/quick").status == 200);
  }

  REQUEST_PATH_CASE("a handler that throws after finish(): the client has its 200, one line says "
                    "the response had been sent, the connection serves on") {
    HostProcess host(after_response_host({"--workers", "1"}));
    host.expect_log(
        R"(handler failed on GET /finish-then-throw \(request id [^)]+\): failed after )"
        R"(the answer \(after Response::finish\(\): its response had been sent\))");
    auto c = host.connect();
    c.set_keep_conn(true);
    fcgi_test::Response r = c.request("GET", "/finish-then-throw");
    CHECK(r.status == 200);
    CHECK(r.body == "answered\n");
    CHECK(c.request("GET", "/quick").body == "quick\n");
    CHECK(host.wait_log("failed after the answer \\(after Response::finish", Millis{5000}));
    CHECK(it::lines_with(host.log(), "handler failed on").size() == 1);
  }

  REQUEST_PATH_CASE("--request-timeout covers the work after finish(): the client has its 200, "
                    "one line names the request, the next request is served") {
    HostProcess host(after_response_host(
        {"--workers", "1", "--request-timeout", "1", "--graceful-timeout", "3"}));
    NginxProcess nginx({host.address()});
    it::HttpResponse r = it::http_request(nginx.port(), "GET", "/finish-then-work?ms=10000");
    CHECK(r.status == 200);
    CHECK(r.body == "answered\n");
    CHECK(
        host.wait_log(R"(: request "GET /finish-then-work\?ms=10000", request id [^,]+, thread 0 )"
                      R"(\(tid \d+\), ran for [0-9.]+ s past --request-timeout \(1.0 s\): )",
                      Millis{5000}));
    CHECK(it::http_request(nginx.port(), "GET", "/quick", {}, Millis{15000}).status == 200);
    CHECK(it::lines_with(host.log(), "past --request-timeout").size() == 1);
    CHECK_FALSE(it::has(host.log(), "after-response work done"));
  }

  REQUEST_PATH_CASE("on_idle() runs in each idle worker and thread once per idle period") {
    HostProcess host(after_response_host(
        {"--workers", "1", "--idle-work-after", "300", "--trim-when-idle", "on"}));
    const std::size_t lanes = it::request_path_threads();
    // Idle since it started: each lane (the worker, or each of its threads) runs it once.
    REQUIRE(host.wait_log("on_idle ran in pid", Millis{2000}, lanes));
    CHECK_FALSE(host.wait_status(
                        [lanes](const std::string& json) {
                          return it::has(json, "\"idle work runs\":" + std::to_string(lanes));
                        },
                        Millis{2000})
                    .empty());
    // At most once per idle period: over three more periods' time, nothing more.
    CHECK_FALSE(host.wait_log("on_idle ran in pid", Millis{1000}, lanes + 1));
    // And the idle work done, the worker's loop sleeps: no timer wakes it any more.
    const std::vector<pid_t> workers = host.worker_pids();
    REQUIRE(workers.size() == 1);
    const long switches = loop_wakeups(workers[0]);
    CHECK(switches >= 0);
    CHECK_FALSE(it::wait_for([&] { return loop_wakeups(workers[0]) != switches; }, Millis{1000}));
    // A request ends its lane's idle period; ~2 s without requests later it has run again.
    NginxProcess nginx({host.address()});
    CHECK(it::http_request(nginx.port(), "GET", "/quick").status == 200);
    CHECK(host.wait_log("on_idle ran in pid", Millis{2000}, lanes + 1));
    it::check_no_alerts(host);
  }
}
