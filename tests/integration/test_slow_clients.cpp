// Slow and idle clients against the real fcgi-host (echo app), with one-second timeouts: each is
// cut at its deadline, none holds a worker, and holding more connections than the pool has
// workers does not delay anyone else (reading is event-driven). The whole file runs in well under
// a minute: every wait below is bounded.
#include "checks.hpp"
#include "request_modes.hpp"
#include "support/time.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <poll.h>
#include <sys/socket.h>
#include <thread>

using namespace std::chrono_literals;
using fcgi_test::Client;
using fcgi_test::IoStatus;
using fcgi_test::Millis;
using fcgi_test::Params;
using fcgi_test::RecordType;
using it::HostProcess;

namespace {

using Clock = std::chrono::steady_clock;

// "Served at once" on a machine that may be loaded (ctest -j2, CPU hogs in scripts/stress.sh):
// every delay these tests guard against is a 1 s timeout or longer.
constexpr double kPrompt = 0.5; // s

std::vector<std::string> slow_args(const std::string& workers,
                                   const std::vector<std::string>& more = {}) {
  std::vector<std::string> args{
      "--app",          "echo", "--workers",           workers, "--header-timeout", "1",
      "--body-timeout", "1",    "--keepalive-timeout", "1",     "--write-timeout",  "1"};
  return test_support::with_options(args, more);
}

std::string begin(std::uint16_t id, std::uint8_t flags = 0) {
  return fcgi_test::encode_record(RecordType::BeginRequest, id,
                                  fcgi_test::begin_request_body(fcgi_test::Role::Responder, flags));
}

std::string head(std::uint16_t id, const Params& params) {
  return begin(id) +
         fcgi_test::encode_stream(RecordType::Params, id, fcgi_test::encode_params(params));
}

// Waits (bounded) for the host to close `c`; returns when it did, in seconds since `start`, or
// a negative number if it still held the connection at `limit`.
double closed_after(Client& c, Clock::time_point start, Millis limit = Millis{4000}) {
  fcgi_test::ReadAllResult all = c.read_until_closed(limit);
  return all.status == IoStatus::Closed ? test_support::elapsed_s(start) : -1;
}

} // namespace

TEST_SUITE("slow clients") {

  REQUEST_PATH_CASE("idle connect (nothing sent): closed after --header-timeout") {
    HostProcess host(it::with_threads(slow_args("1")));
    auto start = Clock::now();
    Client c = host.connect();
    double t = closed_after(c, start);
    CHECK(t >= 0.9);
    CHECK(t < 2.0);
    CHECK(it::timed_request(host, "/after") < kPrompt);
    CHECK(it::lines_with(host.log(), "--header-timeout").size() == 1);
    it::check_no_alerts(host);
  }

  REQUEST_PATH_CASE(
      "partial head (BEGIN_REQUEST and half the params): closed after --header-timeout") {
    HostProcess host(it::with_threads(slow_args("1")));
    auto start = Clock::now();
    Client c = host.connect();
    std::string h = head(1, fcgi_test::standard_params("GET", "/partial", 0));
    c.send_raw(h.substr(0, h.size() / 2));
    double t = closed_after(c, start);
    CHECK(t >= 0.9);
    CHECK(t < 2.0);
    CHECK(it::timed_request(host, "/after") < kPrompt);
    it::check_no_alerts(host);
  }

  REQUEST_PATH_CASE("params trickled 1 byte per 200 ms: cut at the header deadline, not renewed") {
    HostProcess host(it::with_threads(slow_args("1")));
    auto start = Clock::now();
    Client c = host.connect();
    std::string h = head(1, fcgi_test::standard_params("GET", "/trickle", 0));
    std::size_t sent = 0;
    bool closed = false;
    // At most 25 bytes (5 s): the host must cut it after about one second.
    for (; sent < 25 && !closed; ++sent) {
      try {
        c.send_raw(h.substr(sent, 1));
      } catch (const fcgi_test::Error&) {
        closed = true;
        break;
      }
      closed = c.read_record(Millis{200}).status == IoStatus::Closed;
    }
    double t = test_support::elapsed_s(start);
    CHECK(closed);
    CHECK(t >= 0.9);
    CHECK(t < 2.0);
    CHECK(sent <= 10);
    CHECK(it::timed_request(host, "/after") < kPrompt);
    it::check_no_alerts(host);
  }

  REQUEST_PATH_CASE(
      "a body that trickles: closed at its total deadline, however steady the trickle") {
    HostProcess host(it::with_threads(slow_args("1")));
    Client c = host.connect();
    std::string body(1000, 'b');
    c.send_raw(head(1, fcgi_test::standard_params("POST", "/trickle", body.size())));
    auto start = Clock::now();
    // One body byte every 100 ms: each read comes well within --body-timeout (1 s), but the
    // body's total deadline (--body-timeout plus what --body-min-rate earns) passes.
    bool closed = false;
    for (int i = 0; i < 40 && !closed; ++i) {
      c.send_raw(fcgi_test::encode_record(RecordType::Stdin, 1, body.substr(0, 1)));
      closed = c.read_until_closed(Millis{100}).status == IoStatus::Closed;
    }
    double t = test_support::elapsed_s(start);
    CHECK(closed);
    CHECK(t >= 0.9);
    CHECK(t < 2.0);
    CHECK(it::timed_request(host, "/after") < kPrompt);
    CHECK(it::lines_with(host.log(), "--body-timeout").size() == 1);
    it::check_no_alerts(host);
  }

  REQUEST_PATH_CASE("idle kept connection: closed after --keepalive-timeout, without a log line") {
    HostProcess host(it::with_threads(slow_args("1")));
    Client c = host.connect();
    c.set_keep_conn(true);
    CHECK(c.request("GET", "/kept").status == 200);
    auto served = Clock::now();
    double t = closed_after(c, served);
    CHECK(t >= 0.9);
    CHECK(t < 2.0);
    CHECK(it::timed_request(host, "/after") < kPrompt);
    CHECK(it::lines_with(host.log(), "[warn]").empty());
    it::check_no_alerts(host);
  }

  REQUEST_PATH_CASE("a client that stops reading an 8 MiB response does not hold the worker, "
                    "the response is cut at --write-timeout") {
    HostProcess host(it::with_threads(slow_args("1", {"--max-body", "9M"})));
    auto workers = host.wait_workers(1);
    REQUIRE(workers.size() == 1);
    std::string body = it::pattern_body(8u << 20);
    Client reader = host.connect(Millis{10000});
    reader.set_timeout(Millis{10000});
    fcgi_test::Request req;
    req.method = "POST";
    req.uri = "/echo-big";
    req.body = body;
    req.keep_conn = false;
    reader.send_request(req); // sent whole; the response is not read for now
    pollfd p{reader.fd(), POLLIN, 0};
    REQUIRE(::poll(&p, 1, 10000) == 1); // the response started
    auto writing = Clock::now();
    // The response is complete in memory: the worker sends the rest from its loop, and serves
    // the next request meanwhile.
    double took = it::timed_request(host, "/next");
    INFO("next request answered " << took << " s after the response started");
    CHECK(took < kPrompt);
    // The reader that never reads loses its connection at the response's total deadline.
    CHECK(
        it::wait_for([&] { return !it::lines_with(host.log(), "within --write-timeout").empty(); },
                     Millis{5000}));
    CHECK(test_support::elapsed_s(writing) >= 0.5);
    CHECK(test_support::elapsed_s(writing) < 3.0);
    fcgi_test::ReadAllResult all = reader.read_until_closed(Millis{5000});
    CHECK(all.status == IoStatus::Closed);
    CHECK(all.data.size() < body.size());
    CHECK(host.worker_pids() == workers);
    it::check_no_alerts(host);
  }

  REQUEST_PATH_CASE("a client that reads a large response slowly is cut at --write-timeout in "
                    "all, however steadily it reads") {
    HostProcess host(it::with_threads(slow_args("1", {"--max-body", "9M"})));
    std::string body = it::pattern_body(4u << 20);
    Client reader = host.connect(Millis{10000});
    int small = 4096;
    ::setsockopt(reader.fd(), SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    fcgi_test::Request req;
    req.method = "POST";
    req.uri = "/echo-slow-reader";
    req.body = body;
    req.keep_conn = false;
    reader.send_request(req);
    auto start = Clock::now();
    // Read 16 KiB every 50 ms: steady progress, far too slow for 4 MiB within 1 s.
    std::size_t got = 0;
    bool closed = false;
    char buf[16384];
    for (int i = 0; i < 100 && !closed; ++i) {
      ::poll(nullptr, 0, 50); // the reader's pace: part of the scenario, not a synchronisation
      ssize_t n = ::recv(reader.fd(), buf, sizeof buf, MSG_DONTWAIT);
      if (n == 0) closed = true;
      if (n > 0) got += static_cast<std::size_t>(n);
    }
    double t = test_support::elapsed_s(start);
    CHECK(closed);
    CHECK(got < body.size());
    CHECK(t < 3.0);
    CHECK(it::timed_request(host, "/after") < kPrompt);
    CHECK(it::lines_with(host.log(), "within --write-timeout").size() == 1);
    it::check_no_alerts(host);
  }

  REQUEST_PATH_CASE("a peer that never closes after its reply does not delay the next request") {
    HostProcess host(it::with_threads(slow_args("1", {"--max-body", "1K"})));
    std::vector<Client> held;
    for (int i = 0; i < 5; ++i) {
      CAPTURE(i);
      Client c = host.connect();
      c.set_keep_conn(false);
      auto start = Clock::now();
      fcgi_test::Response r = c.request("GET", "/no-close");
      CHECK(r.status == 200);
      CHECK(test_support::elapsed_s(start) < kPrompt);
      held.push_back(std::move(c)); // never closed, never read to EOF
      CHECK(it::timed_request(host, "/next") < kPrompt);
    }
    // Refused requests are drained for up to 2 s before the close: in epoll, not in a wait.
    for (int i = 0; i < 3; ++i) {
      CAPTURE(i);
      Client c = host.connect();
      c.send_raw(head(1, fcgi_test::standard_params("POST", "/big", 4096)));
      fcgi_test::Response r = c.read_response(1);
      CHECK(r.status == 413);
      held.push_back(std::move(c));
      CHECK(it::timed_request(host, "/next") < kPrompt);
    }
    it::check_no_alerts(host);
  }

  REQUEST_PATH_CASE("pool of 2: 20 idle and 10 trickling connections do not delay a request") {
    HostProcess host(it::with_threads(slow_args("2", {"--header-timeout", "10"})));
    auto workers = host.wait_workers(2);
    REQUIRE(workers.size() == 2);
    std::vector<Client> idle;
    for (int i = 0; i < 20; ++i)
      idle.push_back(host.connect());
    std::vector<Client> trickling;
    std::vector<std::string> heads;
    for (int i = 0; i < 10; ++i) {
      trickling.push_back(host.connect());
      heads.push_back(head(1, fcgi_test::standard_params("GET", "/slow/" + std::to_string(i), 0)));
    }
    std::atomic<bool> stop{false};
    std::atomic<int> trickle_errors{0};
    std::atomic<int> rounds{0};              // bytes sent on every trickling connection so far
    constexpr auto trickle_interval = 200ms; // the attack's pace: 1 byte per connection
    std::thread trickler([&] {
      auto deadline = Clock::now() + 4s; // at most
      for (std::size_t pos = 0; !stop && Clock::now() < deadline; ++pos) {
        for (std::size_t i = 0; i < trickling.size(); ++i) {
          try {
            if (pos < heads[i].size()) trickling[i].send_raw(heads[i].substr(pos, 1));
          } catch (const fcgi_test::Error&) {
            ++trickle_errors;
          }
        }
        ++rounds;
        test_wait::hold_for(trickle_interval);
      }
    });
    // Normal requests spread over the attack: one after each of its rounds, from the second on.
    double worst = 0;
    for (int i = 0; i < 10; ++i) {
      int round = rounds;
      REQUIRE(it::wait_for([&] { return rounds > std::max(round, 1); }, Millis{2000}));
      worst = std::max(worst, it::timed_request(host, "/normal/" + std::to_string(i)));
    }
    stop = true;
    trickler.join();
    INFO("slowest normal request during the attack: " << worst << " s");
    CHECK(worst < kPrompt);
    CHECK(trickle_errors == 0); // the host still held every slow connection
    // The attack stops: its connections go away; the pool serves normally.
    idle.clear();
    trickling.clear();
    for (int i = 0; i < 5; ++i)
      CHECK(it::timed_request(host, "/after/" + std::to_string(i)) < kPrompt);
    CHECK(host.worker_pids() == workers);
    it::check_no_alerts(host);
  }
}
