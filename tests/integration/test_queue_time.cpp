// Queue time and shedding: the host measures arrival (stamped by the web server in
// HTTP_X_REQUEST_START) to handler start, and with --max-queue-time answers 503 at once, without
// running the handler, to a request that waited too long or whose client is gone.
#include "checks.hpp"

#include <chrono>
#include <regex>

using namespace std::chrono_literals;
using fcgi_test::Millis;
using it::HostProcess;

namespace {

// nginx's ${msec} form of an arrival stamp: "t=<seconds>.<milliseconds>".
std::string stamp(std::chrono::system_clock::time_point t) {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
  char buf[48];
  std::snprintf(buf, sizeof buf, "t=%lld.%03lld", static_cast<long long>(ms / 1000),
                static_cast<long long>(ms % 1000));
  return buf;
}

fcgi_test::Request stamped(const std::string& uri, std::chrono::system_clock::time_point t) {
  fcgi_test::Request r;
  r.uri = uri;
  r.extra_params = {{"HTTP_X_REQUEST_START", stamp(t)}};
  return r;
}

long number_after(const std::string& text, const std::string& pattern) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex(pattern))) return -1;
  return std::stol(m[1]);
}

long measured(const std::string& json) {
  return number_after(json, R"("queue time":\{"measured":([0-9]+))");
}
// The queue-time part of the JSON page (its buckets have the same names as the handlers').
std::string queue_part(const std::string& json) {
  std::size_t at = json.find("\"queue time\"");
  return at == std::string::npos ? std::string() : json.substr(at);
}
long echo_calls(const std::string& json) {
  return number_after(json,
                      R"re("route":"ANY /\*","calls":([0-9]+))re"); // the echo app's catch-all
}

} // namespace

TEST_SUITE("queue time") {

  TEST_CASE("--max-queue-time 100: requests that waited behind a 500 ms handler get 503 at once "
            "and never run while unstamped requests run and are not measured") {
    HostProcess host({"--app", "echo", "--workers", "1", "--max-queue-time", "100",
                      "--status-listen", "unix:{dir}/status.sock"});
    REQUIRE(host.wait_workers(1).size() == 1);
    // Stamped before the held request is sent: whenever the worker reaches the queued requests,
    // they have waited at least as long as the held one ran (500 ms > 100 ms), however slow the
    // machine is.
    auto arrival = std::chrono::system_clock::now();
    auto held = host.connect();
    fcgi_test::Request slow;
    slow.uri = "/echo?delay_ms=500"; // no stamp: runs, not measured
    held.send_request(slow);
    REQUIRE(host.wait_active(1));
    const int queued = 3;
    std::vector<fcgi_test::Client> waiting;
    for (int i = 0; i < queued; ++i) {
      waiting.push_back(host.connect());
      waiting.back().send_request(stamped("/echo?delay_ms=500&n=" + std::to_string(i), arrival));
    }
    // A client that gives up while queued: its request is not run either.
    {
      auto gone = host.connect();
      gone.send_request(stamped("/echo?delay_ms=500&gone=1", std::chrono::system_clock::now()));
    }
    CHECK(held.read_response(1).status == 200);
    auto after_held = std::chrono::steady_clock::now();
    for (auto& c : waiting) {
      fcgi_test::Response r = c.read_response(1);
      CHECK(r.status == 503);
      CHECK(r.header("Retry-After").value_or("") == "1");
    }
    // Had they run, the three would have taken 1.5 s.
    CHECK(std::chrono::steady_clock::now() - after_held < 1400ms);
    // An unstamped request after them runs.
    CHECK(host.connect().request("GET", "/echo?plain=1").status == 200);

    std::string json = host.wait_status(
        [](const std::string& page) {
          return number_after(page, R"("client gone":([0-9]+))") == 1 && echo_calls(page) >= 2;
        },
        Millis{3000});
    REQUIRE(!json.empty());
    CHECK(echo_calls(json) == 2); // the held request and the unstamped one: nothing shed ran
    CHECK(number_after(json, R"("waited too long":([0-9]+))") == queued);
    CHECK(measured(json) == queued + 1); // the stamped ones, the gone client's included
    // The three stamped before the held request waited 500 ms or more: above 0.5 s.
    CHECK(number_after(queue_part(json), R"("1.0":([0-9]+))") +
              number_after(queue_part(json), R"("2.5":([0-9]+))") >=
          queued);
    CHECK(it::lines_with(host.log(), "over --max-queue-time").size() >= 1);
    it::check_no_alerts(host);
  }

  TEST_CASE("without --max-queue-time stamped requests run and the histogram counts them and the "
            "access log's %q shows the queue time or '-' when not stamped") {
    HostProcess host({"--app", "echo", "--workers", "1", "--status-listen",
                      "unix:{dir}/status.sock", "--access-log", "{dir}/access.log",
                      "--access-format", "%u %q"});
    auto old = std::chrono::system_clock::now() - 2s;
    for (int i = 0; i < 4; ++i)
      CHECK(host.connect().request(stamped("/echo?s=" + std::to_string(i), old)).status == 200);
    CHECK(host.connect().request("GET", "/echo?unstamped=1").status == 200);
    std::string json = host.wait_status(
        [](const std::string& page) { return echo_calls(page) == 5; }, Millis{3000});
    REQUIRE(!json.empty());
    CHECK(measured(json) == 4);
    CHECK(echo_calls(json) == 5);
    // All four waited about 2 s: in the (1, 2.5] s bucket.
    CHECK(number_after(queue_part(json), R"("2.5":([0-9]+))") == 4);
    std::string path = host.dir().file("access.log");
    REQUIRE(it::wait_for([&] { return it::lines_with(it::read_file(path), "/echo").size() == 5; },
                         Millis{2000}));
    std::string log = it::read_file(path);
    CHECK(std::regex_search(log, std::regex(R"(/echo\?s=0 (19|2[0-9])[0-9][0-9]\.[0-9]+)")));
    CHECK(log.find("/echo?unstamped=1 -") != std::string::npos);
    auto c = fcgi_test::Client::connect("unix:" + host.dir().file("status.sock"));
    c.set_keep_conn(false);
    std::string om = c.request("GET", "/status?openmetrics").body;
    CHECK(om.find("fcgihost_queue_time_seconds_count 4") != std::string::npos);
    CHECK(om.find("fcgihost_shed_requests_total{reason=\"queue_time\"} 0") != std::string::npos);
  }

  TEST_CASE("through nginx: its t=${msec} stamp is measured") {
    HostProcess host({"--app", "echo", "--workers", "1", "--status-listen",
                      "unix:{dir}/status.sock", "--max-queue-time", "10000"});
    it::NginxProcess nginx({host.address()});
    it::HttpResponse r = it::http_request(nginx.port(), "GET", "/echo?via=nginx");
    CHECK(r.status == 200);
    CHECK(r.body.find("param HTTP_X_REQUEST_START=t=") != std::string::npos);
    std::string json = host.wait_status(
        [](const std::string& page) { return echo_calls(page) == 1; }, Millis{3000});
    REQUIRE(!json.empty());
    CHECK(measured(json) == 1);
    CHECK(number_after(json, R"("waited too long":([0-9]+))") == 0);
  }
}
