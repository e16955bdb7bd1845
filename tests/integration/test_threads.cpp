// --threads: handler threads in a worker, through the real binary and nginx. Concurrency is shown
// by the status page (busy threads) and by elapsed time against the serial lower bound; request
// timeouts cut one request and let the others finish; a crash in one thread names every request
// in flight and counts the others as lost; reloads, upgrades and recycling lose nothing.
#include "checks.hpp"
#include "lifecycle_load.hpp"
#include "request_modes.hpp"

#include <arpa/inet.h>
#include <chrono>
#include <csignal>
#include <netinet/in.h>
#include <poll.h>
#include <regex>
#include <string>
#include <sys/socket.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>
#include <vector>

using fcgi_test::Millis;
using it::HostOptions;
using it::HostProcess;
using it::json_number;

using it::kCrashPlugin;

namespace {

using it::has;

// `n` GET requests of `target` at once through nginx; their statuses, in order.
std::vector<int> concurrent_gets(int port, const std::vector<std::string>& targets) {
  std::vector<int> statuses(targets.size(), 0);
  std::vector<std::thread> clients;
  for (std::size_t i = 0; i < targets.size(); ++i)
    clients.emplace_back([&, i] {
      try {
        statuses[i] = it::http_request(port, "GET", targets[i], {}, Millis{15000}).status;
      } catch (const std::exception&) {
        statuses[i] = 0;
      }
    });
  for (auto& c : clients)
    c.join();
  return statuses;
}

// A GET through nginx read as its bytes come (bounded: 10 s, until the close), with the arrival
// of each read.
struct Streamed {
  std::string text;
  std::vector<std::pair<std::size_t, std::chrono::steady_clock::time_point>> reads; // end, when
  // When the byte at `offset` arrived at the client.
  std::chrono::steady_clock::time_point arrival(std::size_t offset) const {
    for (const auto& [end, at] : reads)
      if (offset < end) return at;
    return {};
  }
  // The offsets of each occurrence of `needle`.
  std::vector<std::size_t> find_all(const std::string& needle) const {
    std::vector<std::size_t> all;
    for (std::size_t at = text.find(needle); at != std::string::npos;
         at = text.find(needle, at + 1))
      all.push_back(at);
    return all;
  }
};

Streamed stream_through(int port, const std::string& target) {
  Streamed s;
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<std::uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  std::string get = "GET " + target + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n";
  REQUIRE(::write(fd, get.data(), get.size()) == static_cast<ssize_t>(get.size()));
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 500) <= 0) continue;
    char buf[4096];
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n <= 0) break;
    s.text.append(buf, static_cast<std::size_t>(n));
    s.reads.emplace_back(s.text.size(), std::chrono::steady_clock::now());
  }
  ::close(fd);
  return s;
}

double ms_between(std::chrono::steady_clock::time_point a,
                  std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// A host of one worker with `threads` handler threads of the crash plugin, its status socket on.
HostOptions one_worker(int threads, std::vector<std::string> more = {}) {
  HostOptions o;
  o.args = {"--app", kCrashPlugin, "--workers", "1", "--threads", std::to_string(threads)};
  o.args.insert(o.args.end(), more.begin(), more.end());
  o.status_socket = true;
  return o;
}

} // namespace

TEST_SUITE("threads") {
  TEST_CASE("--threads 8: one worker serves 8 requests at once (8 busy threads), and 8 "
            "concurrent 50 ms requests take well under the 400 ms one thread needs") {
    HostProcess host(one_worker(8));
    it::NginxProcess nginx({host.address()});

    // All eight inside their handlers at once, seen by the master.
    std::thread slow(
        [&] { concurrent_gets(nginx.port(), std::vector<std::string>(8, "/slow?ms=1500")); });
    bool eight_busy = !host.wait_status("busy threads", 8).empty();
    slow.join();
    CHECK(eight_busy);
    // A thread is idle again just after its response's last byte went out: wait for the last.
    std::string json = host.wait_status("busy threads", 0);
    CHECK(!json.empty());
    CHECK(json_number(json, "idle threads") == 8);

    auto begin = std::chrono::steady_clock::now();
    std::vector<int> statuses =
        concurrent_gets(nginx.port(), std::vector<std::string>(8, "/slow?ms=50"));
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
    MESSAGE("8 concurrent 50 ms requests, 8 threads in 1 worker: " << ms << " ms");
    for (int s : statuses)
      CHECK(s == 200);
    CHECK(ms < 400); // one thread needs at least 8 x 50 ms
    it::check_no_alerts(host);
  }

  TEST_CASE("a request past --request-timeout is cut (504) while the worker's other requests "
            "finish with 200, one stack of all threads, the worker replaced") {
    HostProcess host(one_worker(4, {"--request-timeout", "2", "--graceful-timeout", "10"}));
    host.allow_log("past --request-timeout");
    std::vector<pid_t> before = host.wait_workers(1);
    REQUIRE(before.size() == 1);
    it::NginxProcess nginx({host.address()});

    int stuck = 0;
    std::thread hung([&] {
      stuck = it::http_request(nginx.port(), "GET", "/slow?ms=6000", {}, Millis{15000}).status;
    });
    // The others start once the stuck one has run 1.2 s: they are in flight when it is cut at
    // 2 s, and each finishes within its own 2 s.
    REQUIRE(!host.wait_status(
                     [](const std::string& json) {
                       return json_number(json, "request duration") >= 1'200'000;
                     },
                     Millis{5000}, true)
                 .empty());
    std::vector<int> others =
        concurrent_gets(nginx.port(), {"/slow?ms=1500", "/slow?ms=1500", "/slow?ms=1500"});
    hung.join();
    INFO("host log:\n" << host.log());
    CHECK(stuck == 504);
    for (int s : others)
      CHECK(s == 200);
    // One line for the event, the same form as with one thread, and each stack under its thread.
    REQUIRE(
        host.wait_log(R"(: request "GET /slow\?ms=6000", request id [^,]+, thread \d \(tid \d+\), )"
                      R"(ran for [0-9.]+ s past --request-timeout \(2.0 s\): its client got 504, )"
                      R"(the worker stops \(its other requests finish\); stack:)"));
    CHECK(has(host.log(), "\nTID "));
    CHECK(has(host.log(), "sleep_in_named_function")); // the stuck thread's frames, among all
    CHECK(!host.wait_worker_replaced(before[0], 1, Millis{15000}).empty());
    CHECK(it::http_request(nginx.port(), "GET", "/id").status == 200);
  }

  TEST_CASE("a crash in one of 4 threads: the block names every request in flight (the faulting "
            "one marked) and counts the others as lost") {
    HostProcess host(one_worker(4));
    host.allow_log("worker .* killed by signal");
    std::vector<pid_t> before = host.wait_workers(1);
    REQUIRE(before.size() == 1);
    it::NginxProcess nginx({host.address()});
    std::thread slow(
        [&] { concurrent_gets(nginx.port(), std::vector<std::string>(3, "/slow?ms=4000")); });
    REQUIRE(!host.wait_status("busy threads", 3).empty());
    CHECK(it::http_request(nginx.port(), "GET", "/crash/segv").status == 502);
    slow.join();
    INFO("host log:\n" << host.log());
    REQUIRE(host.wait_log(R"(faulted in request: "GET /crash/segv")"));
    REQUIRE(host.wait_log(R"(lost request: "GET /slow\?ms=4000")", Millis{5000}, 3));
    CHECK(!host.wait_status("requests lost in crashes", 3).empty());
    CHECK(!host.wait_worker_replaced(before[0], 1).empty());
  }

  TEST_CASE("a crash in the loop's own thread (an idle worker's first request runs there): the "
            "block names it as thread 0's, the worker is replaced, and a slow request there "
            "does not hold the others") {
    HostProcess host(one_worker(4));
    host.allow_log("worker .* killed by signal");
    std::vector<pid_t> before = host.wait_workers(1);
    REQUIRE(before.size() == 1);
    it::NginxProcess nginx({host.address()});
    CHECK(it::http_request(nginx.port(), "GET", "/crash/segv").status == 502);
    INFO("host log:\n" << host.log());
    REQUIRE(host.wait_log(R"(thread 0 \(tid \d+\) faulted in request: "GET /crash/segv")"));
    std::vector<pid_t> after = host.wait_worker_replaced(before[0], 1);
    REQUIRE(!after.empty());
    // The replacement's first request waits 3 s on the loop's thread; the others answer
    // meanwhile, through the other threads.
    int slow = 0;
    std::thread held([&] {
      slow = it::http_request(nginx.port(), "GET", "/slow?ms=3000", {}, Millis{15000}).status;
    });
    REQUIRE(!host.wait_status("busy threads", 1).empty());
    const auto begin = std::chrono::steady_clock::now();
    std::vector<int> others = concurrent_gets(nginx.port(), std::vector<std::string>(6, "/id"));
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - begin).count();
    held.join();
    CHECK(slow == 200);
    for (int s : others)
      CHECK(s == 200);
    CHECK(ms < 2000); // not after the slow one
  }

  TEST_CASE("HUP and USR2 under threaded load lose nothing, --max-requests recycles a threaded "
            "worker without losing its in-flight requests") {
    HostOptions o;
    o.args = {"--app", kCrashPlugin,     "--workers", "2",         "--threads",
              "4",     "--max-requests", "60",        "--pidfile", "{dir}/host.pid"};
    HostProcess host(o);
    std::string pidfile = host.dir().file("host.pid");
    REQUIRE(it::wait_for([&] { return it::read_pid(pidfile) == host.pid(); }, Millis{5000}));
    it::NginxProcess nginx({host.address()});
    it::HttpLoad load(nginx.port(), "/slow?ms=5", 6);
    REQUIRE(load.wait_more(80));
    host.signal(SIGHUP);
    REQUIRE(host.wait_log("generation 2 ready", Millis{10000}));
    REQUIRE(load.wait_more(150)); // past --max-requests: workers recycled meanwhile
    host.signal(SIGUSR2);
    CHECK(host.wait_exit(Millis{15000}).value_or(-1) == 0);
    pid_t new_master = it::read_pid(pidfile);
    CHECK(load.wait_more(80));
    load.stop();
    MESSAGE("threaded HUP + USR2 + recycling: " << load.samples().size() << " requests, "
                                                << load.failures() << " failures");
    INFO("first error: " << load.first_error() << "\nhost log:\n" << host.log());
    CHECK(load.failures() == 0);
    CHECK(!it::lines_with(host.log(), "worker recycling: --max-requests reached").empty());
    if (new_master > 0 && new_master != host.pid() && it::process_alive(new_master)) {
      ::kill(new_master, SIGTERM);
      CHECK(test_wait::wait_process_exit(new_master, Millis{10000}));
    }
  }

  TEST_CASE("the notes example with 4 threads: a SQLite connection per thread, concurrent "
            "writes and reads all answered") {
    it::TempDir data;
    // The workers create the database here: started as root, they run as nobody.
    if (geteuid() == 0) REQUIRE(::chmod(data.path().c_str(), 0777) == 0);
    HostProcess host({"--app", FCGI_TEST_NOTES_PLUGIN, "--workers", "1", "--threads", "4", "--env",
                      "NOTES_DB=" + data.file("notes.db")});
    std::vector<int> created(8, 0), listed(8, 0);
    std::vector<std::thread> clients;
    for (int i = 0; i < 8; ++i)
      clients.emplace_back([&, i] {
        fcgi_test::Client c = host.connect();
        created[i] = c.request("POST", "/notes", R"({"title":"note )" + std::to_string(i) + "\"}",
                               {{"CONTENT_TYPE", "application/json"}})
                         .status;
        listed[i] = c.request("GET", "/notes").status;
      });
    for (auto& c : clients)
      c.join();
    for (int i = 0; i < 8; ++i) {
      CHECK(created[i] == 201);
      CHECK(listed[i] == 200);
    }
    std::string all = host.connect().request("GET", "/notes").body;
    for (int i = 0; i < 8; ++i)
      CHECK(has(all, "\"title\":\"note " + std::to_string(i) + "\""));
    it::check_no_alerts(host);
  }

  TEST_CASE("server-sent events through nginx arrive one by one, as the handler sends them") {
    HostProcess host(one_worker(2));
    it::NginxProcess nginx({host.address()});
    Streamed seen = stream_through(nginx.port(), "/events?n=3&gap_ms=400");
    INFO("response:\n" << seen.text);
    CHECK(has(seen.text, "Content-Type: text/event-stream"));
    CHECK(has(seen.text, "event: tick\nid: 1\ndata: event 1\n\n"));
    std::vector<std::size_t> events = seen.find_all("data: event ");
    REQUIRE(events.size() == 3);
    auto t0 = seen.arrival(events[0]);
    MESSAGE("events arrived at +0, +" << ms_between(t0, seen.arrival(events[1])) << ", +"
                                      << ms_between(t0, seen.arrival(events[2])) << " ms");
    // Sent 400 ms apart: all at the end would arrive together.
    CHECK(ms_between(t0, seen.arrival(events[2])) > 500);
    CHECK(ms_between(t0, seen.arrival(events[1])) > 250);
  }

  REQUEST_PATH_CASE("an event stream quiet past --event-heartbeat gets heartbeat comments "
                    "through nginx, between its events") {
    HostProcess host(
        one_worker(static_cast<int>(it::request_path_threads()), {"--event-heartbeat", "0.4"}));
    it::NginxProcess nginx({host.address()});
    // Heartbeats at about 0.4, 0.8 and 1.2 s; the second event at 1.5 s, well apart from any
    // (a gap that is a multiple of the interval put the last heartbeat in the event's read).
    Streamed seen = stream_through(nginx.port(), "/events?n=2&gap_ms=1500");
    INFO("response:\n" << seen.text);
    std::vector<std::size_t> events = seen.find_all("data: event ");
    // (Each in a chunk of its own: nginx passes them on as they come.)
    std::vector<std::size_t> beats = seen.find_all("\n: heartbeat\n\n");
    REQUIRE(events.size() == 2);
    REQUIRE(!beats.empty());
    auto t0 = seen.arrival(events[0]);
    for (std::size_t b : beats)
      MESSAGE("heartbeat arrived at +" << ms_between(t0, seen.arrival(b + 1)) << " ms");
    MESSAGE("second event arrived at +" << ms_between(t0, seen.arrival(events[1])) << " ms");
    // Each between the two events, none inside one, and each as it was sent: before the second.
    for (std::size_t b : beats) {
      CHECK(b > events[0]);
      CHECK(b < events[1]);
      CHECK(seen.arrival(b + 1) < seen.arrival(events[1]));
    }
    it::check_no_alerts(host);
  }

  TEST_CASE("a client that stops reading a streamed response holds its thread only until "
            "--write-timeout: one line, the handler's write fails, the worker serves on") {
    HostProcess host(one_worker(2, {"--write-timeout", "1"}));
    host.allow_log("did not read it within --write-timeout");
    fcgi_test::Client stalled = host.connect();
    fcgi_test::Request request;
    request.uri = "/flood";
    stalled.send_request(request); // and never reads
    REQUIRE(host.wait_log(R"(response to GET /flood \(request id \w+, thread \d\) cut: the client )"
                          R"(did not read it within --write-timeout)",
                          Millis{10000}));
    REQUIRE(host.wait_log("flood ended: write refused", Millis{10000}));
    CHECK(stalled.read_until_closed(Millis{10000}).status == fcgi_test::IoStatus::Closed);
    CHECK(host.connect().request("GET", "/id").status == 200);
    CHECK(it::lines_with(host.log(), "within --write-timeout").size() == 1);
  }

  TEST_CASE("--threads 4: CPU time per route is the handler thread's own, sampled as with one "
            "thread") {
    HostProcess host(one_worker(4));
    fcgi_test::Client c = host.connect();
    // One kept connection: its requests take the first free thread, whose samples are 1 in 64.
    for (int i = 0; i < 128; ++i)
      REQUIRE(c.request("GET", "/spin?ms=2").status == 200);
    // A request is counted just after its response's last byte went out: wait for the last.
    const std::string json = host.wait_status(
        [](const std::string& page) { return has(page, R"("route":"GET /spin","calls":128,)"); },
        Millis{5000}, true);
    std::smatch m;
    REQUIRE(std::regex_search(json, m,
                              std::regex(R"re("route":"[^"]*/spin","calls":(\d+),"5xx":\d+,)re"
                                         R"re("crashed":\d+,"wall seconds":[\d.]+,)re"
                                         R"re("cpu seconds":([\d.]+),"cpu samples":(\d+))re")));
    INFO("status: " << json);
    CHECK(std::stol(m[1]) == 128);
    CHECK(std::stol(m[3]) >= 1);
    // Each call spins 2 ms of its thread's CPU: the estimate is at least 128 x 2 ms.
    CHECK(std::stod(m[2]) >= 0.25);
  }

  TEST_CASE("--threads with --exec is refused at start, naming the option") {
    it::RunResult r =
        it::run_host(HostOptions{{"--threads", "2", "--test-config", "--exec", "/bin/true"}, {}});
    CHECK(r.status == 2);
    CHECK(has(r.output, "threads: an --exec program runs its own loop"));
  }
}
