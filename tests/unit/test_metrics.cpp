// Metrics: route tables, folding an exited worker into the retired totals, the snapshot, the
// status page formats and their one table of fields, the access log line, the status socket's
// params decoder, the health port's pure parts (its request parser, /readyz's rule, its answer).
#include "fcgi_host/observe/access_log.hpp"
#include "fcgi_host/observe/health_request.hpp"
#include "fcgi_host/observe/health_server.hpp"
#include "fcgi_host/observe/host_slot.hpp"
#include "fcgi_host/observe/metrics.hpp"
#include "fcgi_host/observe/route_stats.hpp"
#include "fcgi_host/observe/status_fields.hpp"
#include "fcgi_host/observe/status_page.hpp"
#include "fcgi_host/observe/status_server.hpp"
#include "fcgi_host/worker/output_capture.hpp"
#include "process_manager/listen_queue.hpp"
#include "process_manager/log.hpp"
#include "process_manager/scoreboard.hpp"
#include "support/files.hpp"

#include <cstdio>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <set>
#include <sstream>
#include <string>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace process_manager;
using namespace fcgi_host;

namespace {

const RouteSnapshot* find_route(const Snapshot& s, const std::string& name) {
  for (const RouteSnapshot& r : s.routes)
    if (r.name == name) return &r;
  return nullptr;
}

} // namespace

namespace {
// A request as the host decodes it, for RequestMetrics::end().
const app::Request& request_for(std::string_view method, std::string_view uri) {
  static app::Request r;
  r.clear();
  r.add_param("REQUEST_METHOD", method);
  r.add_param("REQUEST_URI", uri);
  r.finish_params();
  return r;
}
} // namespace

TEST_CASE("metrics: latency buckets take their upper bound inclusively") {
  CHECK(latency_bucket(0) == 0);
  CHECK(latency_bucket(1'000'000) == 0);
  CHECK(latency_bucket(1'000'001) == 1);
  CHECK(latency_bucket(10'000'000'000) == kLatencyBuckets - 2);
  CHECK(latency_bucket(10'000'000'001) == kLatencyBuckets - 1);
}

TEST_CASE("metrics: a full route table sends new names to the overflow entry") {
  Scoreboard sb(1, 1, fcgi_host::kHostArea);
  sb.prepare(0, 1);
  RouteTable& t = fcgi_host::host_slot(sb, 0).routes;
  for (std::size_t i = 0; i < kMaxRoutes - 1; ++i)
    CHECK(claim_route(t, "/r" + std::to_string(i)) == i);
  CHECK(claim_route(t, "/r5") == 5);
  std::size_t overflow = claim_route(t, "/new");
  CHECK(overflow == kMaxRoutes - 1);
  CHECK(claim_route(t, "/another") == overflow);
  CHECK(std::string(t.routes[overflow].name, t.routes[overflow].name_len) == kOverflowRoute);
  CHECK(claim_route(t, "") == claim_route(t, "/")); // an empty path is "/"
}

TEST_CASE("metrics: a worker's numbers survive its exit (retire) exactly") {
  Scoreboard sb(3, 1, fcgi_host::kHostArea);
  for (std::size_t i = 0; i < 3; ++i)
    sb.prepare(i, 1);
  ObservabilitySettings settings;
  for (std::size_t slot : {0u, 1u}) {
    sb.slot(slot).generation = 1;
    sb.slot(slot).state = WorkerState::Idle;
    RequestMetrics m(fcgi_host::host_slot(sb, slot), settings);
    for (int i = 0; i < 10; ++i) {
      m.begin(1);
      m.end("/a", i == 0 ? 503 : 200, request_for("GET", "/a"), false);
      sb.slot(slot).requests += 1;
    }
    m.begin(1);
    m.end("/b", 200, request_for("GET", "/b"), false);
    sb.slot(slot).requests += 1;
  }
  fcgi_host::host_slot(sb, 0).accepted = 7;
  Snapshot before = take_snapshot(sb, -1, "static");
  REQUIRE(find_route(before, "/a"));
  CHECK(find_route(before, "/a")->calls == 20);
  CHECK(find_route(before, "/a")->errors == 2);
  CHECK(find_route(before, "/b")->calls == 2);
  CHECK(before.requests == 22);
  CHECK(before.idle == 2);

  sb.slot(0).state = WorkerState::Free; // what the master's reap does, then:
  sb.retire(0);
  CHECK(sb.slot(0).requests == 0);
  CHECK(fcgi_host::host_slot(sb, 0).accepted == 0);
  CHECK(load_route(fcgi_host::host_slot(sb, 0).routes.routes[0]).name_len == 0);
  CHECK(sb.pool().retire_seq % 2 == 0);
  Snapshot after = take_snapshot(sb, -1, "static");
  CHECK(find_route(after, "/a")->calls == 20);
  CHECK(find_route(after, "/a")->errors == 2);
  CHECK(find_route(after, "/b")->calls == 2);
  CHECK(after.requests == 22);
  CHECK(after.accepted == 7);
  CHECK(after.total == 1);
  std::uint64_t buckets = 0;
  for (std::uint64_t b : find_route(after, "/a")->buckets)
    buckets += b;
  CHECK(buckets == 20);

  // The slot's next worker starts from zero; the totals go on.
  sb.slot(0).state = WorkerState::Idle;
  RequestMetrics m(fcgi_host::host_slot(sb, 0), settings);
  m.begin(1);
  m.end("/a", 200, request_for("GET", "/a"), false);
  CHECK(find_route(take_snapshot(sb, -1, "static"), "/a")->calls == 21);
}

TEST_CASE("metrics: a route repeated, alternated, and a new text at the last route's address") {
  Scoreboard sb(1, 1, fcgi_host::kHostArea);
  sb.prepare(0, 1);
  ObservabilitySettings settings;
  sb.slot(0).generation = 1;
  RequestMetrics m(fcgi_host::host_slot(sb, 0), settings);
  auto call = [&](std::string_view route) {
    m.begin(1);
    m.end(route, 200, request_for("GET", "/"), false);
  };
  const std::string a = "GET /a", b = "GET /b";
  for (int i = 0; i < 3; ++i)
    call(a); // the same text at the same address: the last route, without the hash
  call(b);
  call(a);
  // Another text where the last one was (a Router rebuilt in place): its own entry.
  char text[] = "GET /c";
  call(text);
  text[5] = 'd';
  call(text);
  Snapshot snap = take_snapshot(sb, -1, "static");
  CHECK(find_route(snap, "GET /a")->calls == 4);
  CHECK(find_route(snap, "GET /b")->calls == 1);
  CHECK(find_route(snap, "GET /c")->calls == 1);
  REQUIRE(find_route(snap, "GET /d") != nullptr);
  CHECK(find_route(snap, "GET /d")->calls == 1);
}

TEST_CASE("metrics: --metrics off records nothing per route") {
  Scoreboard sb(1, 1, fcgi_host::kHostArea);
  sb.prepare(0, 1);
  ObservabilitySettings settings;
  settings.metrics = false;
  sb.slot(0).generation = 1;
  RequestMetrics m(fcgi_host::host_slot(sb, 0), settings);
  m.begin(1);
  m.end("/a", 200, request_for("GET", "/a"), false);
  CHECK(take_snapshot(sb, -1, "static").routes.empty());
}

TEST_CASE("metrics: CPU time is sampled once every kCpuSampleEvery requests") {
  Scoreboard sb(1, 1, fcgi_host::kHostArea);
  sb.prepare(0, 1);
  ObservabilitySettings settings;
  sb.slot(0).generation = 1;
  RequestMetrics m(fcgi_host::host_slot(sb, 0), settings);
  for (unsigned i = 0; i < 3 * kCpuSampleEvery; ++i) {
    m.begin(1);
    m.end("/a", 200, request_for("GET", "/a"), false);
  }
  CHECK(find_route(take_snapshot(sb, -1, "static"), "/a")->cpu_samples == 3);
}

TEST_CASE("metrics: pool sampling counts all-busy transitions and the maxima") {
  Scoreboard sb(2, 1, fcgi_host::kHostArea);
  for (std::size_t i = 0; i < 2; ++i)
    sb.prepare(i, 1);
  sb.slot(0).state = WorkerState::Handling;
  sb.slot(1).state = WorkerState::Idle;
  sb.sample(4);
  CHECK(sb.pool().max_active == 1);
  CHECK(sb.pool().all_busy == 0);
  sb.slot(1).state = WorkerState::Writing;
  sb.sample(0);
  sb.sample(0); // still all busy: one transition
  CHECK(sb.pool().all_busy == 1);
  CHECK(sb.pool().max_active == 2);
  CHECK(sb.pool().max_listen_queue == 4);
}

TEST_CASE("metrics: with threads, max active counts processes and max busy threads threads") {
  Scoreboard sb(2, 4, fcgi_host::kHostArea);
  for (std::size_t i = 0; i < 2; ++i) {
    sb.prepare(i, 4);
    sb.slot(i).state = WorkerState::Idle;
    for (std::size_t t = 0; t < 4; ++t)
      sb.slot(i).request(t).state = WorkerState::Idle;
  }
  for (std::size_t t = 0; t < 3; ++t)
    sb.slot(0).request(t).state = WorkerState::Handling;
  sb.sample(0);
  CHECK(sb.pool().max_active == 1);
  CHECK(sb.pool().max_busy_threads == 3);
  CHECK(sb.pool().all_busy == 0);
}

TEST_CASE("listen queue: a Unix listening socket reports its waiting connections") {
  char path[] = "/tmp/fcgi-host-lq-XXXXXX";
  REQUIRE(mkdtemp(path));
  std::string sock = std::string(path) + "/s";
  int l = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un sun{};
  sun.sun_family = AF_UNIX;
  std::snprintf(sun.sun_path, sizeof sun.sun_path, "%s", sock.c_str());
  REQUIRE(bind(l, reinterpret_cast<sockaddr*>(&sun), sizeof sun) == 0);
  REQUIRE(listen(l, 7) == 0);
  ListenQueue q = query_listen_queue(l);
  CHECK(q.known);
  CHECK(q.depth == 0);
  CHECK(q.backlog == 7);
  int c[3];
  for (int& fd : c) {
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    REQUIRE(connect(fd, reinterpret_cast<sockaddr*>(&sun), sizeof sun) == 0);
  }
  CHECK(query_listen_queue(l).depth == 3);
  for (int fd : c)
    close(fd);
  close(l);
  unlink(sock.c_str());
  rmdir(path);
  CHECK_FALSE(query_listen_queue(-1).known);
}

TEST_CASE("status page: query words") {
  CHECK(parse_status_query("").format == StatusFormat::Text);
  CHECK(parse_status_query("json").format == StatusFormat::Json);
  StatusQuery q = parse_status_query("openmetrics&full");
  CHECK(q.format == StatusFormat::OpenMetrics);
  CHECK(q.full);
  CHECK(parse_status_query("html&x=1").format == StatusFormat::Html);
  CHECK(parse_status_query("prometheus").format == StatusFormat::Prometheus);
}

TEST_CASE("status page: the Accept header chooses the format unless the query names one") {
  const char* prometheus = "application/openmetrics-text;version=1.0.0,application/"
                           "openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;"
                           "q=0.5,*/*;q=0.1";
  CHECK(parse_status_query("", prometheus).format == StatusFormat::OpenMetrics);
  CHECK(parse_status_query("full", prometheus).full);
  CHECK(parse_status_query("json", prometheus).format == StatusFormat::Json);
  CHECK(format_from_accept("text/plain;version=0.0.4;q=0.9, application/openmetrics-text;"
                           "q=0.5") == StatusFormat::Prometheus);
  CHECK(format_from_accept("application/json") == StatusFormat::Json);
  CHECK(format_from_accept("text/html,application/xhtml+xml,*/*;q=0.8") == StatusFormat::Text);
  CHECK(format_from_accept("*/*") == StatusFormat::Text);
  CHECK(format_from_accept("") == StatusFormat::Text);
  CHECK(format_from_accept("application/openmetrics-text;q=0") == StatusFormat::Text);
}

TEST_CASE("metrics: an aborted request is counted apart, in every status format") {
  Scoreboard sb(1, 1, fcgi_host::kHostArea);
  sb.prepare(0, 1);
  ObservabilitySettings settings;
  sb.slot(0).generation = 1;
  sb.slot(0).state = WorkerState::Idle;
  RequestMetrics m(fcgi_host::host_slot(sb, 0), settings);
  m.begin(1);
  m.end("/a", 200, request_for("GET", "/a"), false, true);
  m.begin(1);
  m.end("/a", 200, request_for("GET", "/a"), false, false);
  Snapshot s = take_snapshot(sb, -1, "static");
  CHECK(s.aborted_requests == 1);
  std::string type;
  CHECK(render_status(s, {StatusFormat::Text, false}, type).find("aborted requests:     1\n") !=
        std::string::npos);
  CHECK(render_status(s, {StatusFormat::Json, false}, type).find("\"aborted requests\":1,") !=
        std::string::npos);
  CHECK(render_status(s, {StatusFormat::OpenMetrics, false}, type)
            .find("\nfcgihost_aborted_requests_total 1\n") != std::string::npos);
  CHECK(render_status(s, {StatusFormat::Prometheus, false}, type)
            .find("# TYPE fcgihost_aborted_requests_total counter\n") != std::string::npos);
  sb.retire(0);
  CHECK(take_snapshot(sb, -1, "static").aborted_requests == 1);
}

TEST_CASE("status page: OpenMetrics counters end in _total, buckets are cumulative, # EOF last") {
  Snapshot s;
  s.pool_mode = "static";
  s.requests = 5;
  RouteSnapshot r;
  r.name = "/q\"x";
  r.calls = 3;
  r.buckets[0] = 1;
  r.buckets[2] = 2;
  s.routes.push_back(r);
  std::string type;
  std::string text = render_status(s, {StatusFormat::OpenMetrics, false}, type);
  CHECK(type.starts_with("application/openmetrics-text; version=1.0.0"));
  CHECK(text.find("fcgihost_requests_total 5\n") != std::string::npos);
  CHECK(text.find("fcgihost_handler_duration_seconds_bucket{route=\"/q\\\"x\",le=\"0.005\"} 3") !=
        std::string::npos);
  CHECK(text.find("le=\"+Inf\"} 3") != std::string::npos);
  CHECK(text.ends_with("# EOF\n"));
  CHECK(text.find("\nfcgihost_worker_restarts_total 0\n") != std::string::npos);
  std::string json = render_status(s, {StatusFormat::Json, false}, type);
  CHECK(json.find("\"worker restarts\":0,") != std::string::npos);
  CHECK(json.find("\"0.005\":3,") != std::string::npos); // cumulative, as in OpenMetrics
  CHECK(json.find("\"+Inf\":3}") != std::string::npos);
}

TEST_CASE("access log: tokens, '-' for what is unknown, control characters replaced") {
  AccessLog& log = AccessLog::get();
  log.open("", "%a %m %u %s %d %c %b %p %w %g %% end");
  AccessLog::Entry e;
  e.remote_addr = "127.0.0.1";
  e.method = "GET";
  e.uri = "/x\ny";
  e.status = 200;
  e.duration_ns = 12'345'678;
  e.pid = 42;
  e.slot = 3;
  e.generation = 2;
  CHECK(log.format_line(e) == "127.0.0.1 GET /x?y 200 12.345 - - 42 3 2 % end");
  e.cpu_ns = 1'500'000;
  e.body_bytes = 10;
  e.remote_addr = "";
  CHECK(log.format_line(e) == "- GET /x?y 200 12.345 1.500 10 42 3 2 % end");
  std::string why;
  CHECK_FALSE(valid_access_format("%z", why));
  CHECK(why.find("%z") != std::string::npos);
  CHECK_FALSE(valid_access_format("100%", why));
  CHECK(valid_access_format(kDefaultAccessFormat, why));
}

TEST_CASE("status page: REMOTE_ADDR and --status-allow") {
  ClientFilter f(std::vector<std::string>{"10.0.0.0/8"});
  CHECK(remote_addr_allowed(f, "10.1.2.3"));
  CHECK_FALSE(remote_addr_allowed(f, "192.0.2.1"));
  CHECK_FALSE(remote_addr_allowed(f, "::1"));
  // Fail closed: what does not parse strictly, and clients of a Unix socket, are refused...
  for (const char* addr : {"", "unix:", "010.1.2.3", "10.1.2.3%eth0", "fe80::1%eth0", "10.1.2.3 ",
                           "10.1.2", "localhost", "::ffff:010.1.2.3"})
    CHECK_MESSAGE(!remote_addr_allowed(f, addr), addr);
  CHECK(remote_addr_allowed(f, "::ffff:10.1.2.3"));
  // ...unless the list says `unix`, which lets in exactly those.
  ClientFilter with_unix(std::vector<std::string>{"10.0.0.0/8", "unix"});
  CHECK(remote_addr_allowed(with_unix, "unix:"));
  CHECK(remote_addr_allowed(with_unix, ""));
  CHECK(remote_addr_allowed(with_unix, "10.1.2.3"));
  CHECK_FALSE(remote_addr_allowed(with_unix, "192.0.2.1"));
  CHECK_FALSE(remote_addr_allowed(with_unix, "010.1.2.3"));
  ClientFilter only_unix(std::vector<std::string>{"unix"});
  CHECK_FALSE(only_unix.allows_everyone());
  CHECK_FALSE(remote_addr_allowed(only_unix, "127.0.0.1"));
  CHECK(remote_addr_allowed(only_unix, "unix:"));
  CHECK(remote_addr_allowed(ClientFilter(), "192.0.2.1"));
  CHECK(remote_addr_allowed(ClientFilter(), "unix:"));
}

TEST_CASE("allow-lists: an empty list or a bad item is refused, naming the item") {
  std::vector<std::string> patterns;
  std::string why;
  for (const char* empty : {"", " , ", ",", " \t "}) {
    CHECK_FALSE(fcgi_host::parse_client_list(empty, patterns, why));
    CHECK(why.find("empty") != std::string::npos);
  }
  CHECK_FALSE(fcgi_host::parse_client_list("127.0.0.1, 010.0.0.1", patterns, why));
  CHECK(why.find("'010.0.0.1'") != std::string::npos);
  CHECK_FALSE(fcgi_host::parse_client_list("fe80::1%eth0", patterns, why));
  CHECK(fcgi_host::parse_client_list("127.0.0.1, ::1 10.0.0.0/8,unix", patterns, why));
  CHECK(patterns == std::vector<std::string>{"127.0.0.1", "::1", "10.0.0.0/8", "unix"});
}

TEST_CASE("output capture: a worker's stdout and stderr lines reach the log with its pid") {
  test_support::TempDir dir("fcgi-host-oc");
  const std::string path = dir.file("log");
  process_manager::Log& log = process_manager::Log::get();
  {
    fcgi_host::OutputCapture capture;
    pid_t child = fork();
    if (child == 0) {
      fcgi_host::OutputCapture::attach(capture.write_fd());
      std::printf("first line\nsecond ");
      std::fflush(stdout);
      std::fprintf(stderr, "half\n");
      _exit(0);
    }
    REQUIRE(child > 0);
    int st = 0;
    waitpid(child, &st, 0);
    log.open(path);
    capture.drain();
    std::string text;
    char buf[4096];
    int fd = open(path.c_str(), O_RDONLY);
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;)
      text.append(buf, static_cast<std::size_t>(n));
    close(fd);
    std::string who = "worker " + std::to_string(child) + ": ";
    CHECK(text.find(who + "first line\n") != std::string::npos);
    CHECK(text.find(who + "second half\n") != std::string::npos);
  }
  log.open("");
}

// The master keeps a worker's unfinished line only while the worker lives: forget() (at reap)
// logs and frees it, so short-lived writers cannot grow the master's memory.
TEST_CASE("output capture: a reaped worker's unfinished line is logged and freed") {
  test_support::TempDir dir("fcgi-host-oc");
  const std::string path = dir.file("log");
  process_manager::Log& log = process_manager::Log::get();
  log.open(path);
  {
    fcgi_host::OutputCapture capture;
    std::vector<pid_t> children;
    for (int i = 0; i < 3; ++i) {
      std::fflush(nullptr); // the child's stdout must not carry this process's buffered text
      pid_t child = fork();
      if (child == 0) {
        fcgi_host::OutputCapture::attach(capture.write_fd());
        std::printf("no newline %d\x1b[2J", i);
        std::fflush(stdout);
        _exit(0);
      }
      REQUIRE(child > 0);
      children.push_back(child);
    }
    for (pid_t child : children) {
      int st = 0;
      waitpid(child, &st, 0);
      capture.forget(child);
    }
    capture.forget(children[0]); // twice: nothing left to log
  }
  log.open("");
  std::string text;
  char buf[4096];
  int fd = open(path.c_str(), O_RDONLY);
  for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;)
    text.append(buf, static_cast<std::size_t>(n));
  close(fd);
  for (int i = 0; i < 3; ++i)
    CHECK(text.find(": no newline " + std::to_string(i) + "\\x1b[2J\n") != std::string::npos);
  CHECK_MESSAGE(std::count(text.begin(), text.end(), '\n') == 3, text);
}

using Verdict = HealthRequest::Verdict;

namespace {

// The views of the result point into `bytes`: a literal here.
HealthRequest parse(std::string_view bytes) {
  return parse_health_request(bytes);
}

int refused_with(const std::string& bytes) {
  HealthRequest r = parse(bytes);
  return r.verdict == Verdict::Bad ? r.status : 0;
}

} // namespace

TEST_CASE("health request: a probe, a scrape and curl's HEAD parse, the path without the query") {
  HealthRequest r = parse("GET /readyz HTTP/1.1\r\nHost: 10.0.0.1:9100\r\nUser-Agent: "
                          "kube-probe/1.28\r\nAccept: */*\r\nConnection: close\r\n\r\n");
  REQUIRE(r.verdict == Verdict::Ready);
  CHECK(r.path == "/readyz");
  CHECK_FALSE(r.head);
  CHECK(r.accept == "*/*");
  r = parse("GET /metrics?x=1 HTTP/1.0\r\naccept:  application/openmetrics-text;version=1.0.0 "
            "\r\n\r\n");
  REQUIRE(r.verdict == Verdict::Ready);
  CHECK(r.path == "/metrics");
  CHECK(r.accept == "application/openmetrics-text;version=1.0.0");
  r = parse("HEAD /livez HTTP/1.1\r\n\r\n");
  REQUIRE(r.verdict == Verdict::Ready);
  CHECK(r.head);
  CHECK(parse("GET /livez HTTP/1.1\r\nContent-Length: 0\r\n\r\n").verdict == Verdict::Ready);
}

TEST_CASE("health request: what is not whole yet waits, within the caps") {
  CHECK(parse("").verdict == Verdict::NeedMore);
  CHECK(parse("GET /livez HTTP/1.1\r\nHost: x\r\n").verdict == Verdict::NeedMore);
  CHECK(refused_with("GET /" + std::string(kMaxHealthRequestLine, 'a')) == 414);
  std::string many = "GET / HTTP/1.1\r\n";
  while (many.size() < kMaxHealthHead)
    many += "X-A: b\r\n";
  CHECK(refused_with(many) == 431);
  std::string headers = "GET / HTTP/1.1\r\n";
  for (std::size_t i = 0; i <= kMaxHealthHeaders; ++i)
    headers += "X: y\r\n";
  CHECK(refused_with(headers + "\r\n") == 431);
}

TEST_CASE("health request: everything else is refused with its status") {
  CHECK(refused_with("POST /livez HTTP/1.1\r\n\r\n") == 405);
  CHECK(refused_with("DELETE /livez HTTP/1.1\r\n\r\n") == 405);
  CHECK(refused_with("GET /livez HTTP/2.0\r\n\r\n") == 505);
  CHECK(refused_with("GET /livez FTP/1.1\r\n\r\n") == 400);
  CHECK(refused_with("GET  /livez HTTP/1.1\r\n\r\n") == 400);
  CHECK(refused_with("GET livez HTTP/1.1\r\n\r\n") == 400);
  CHECK(refused_with("GET http://x/livez HTTP/1.1\r\n\r\n") == 400);
  CHECK(refused_with("GET /a\x7f HTTP/1.1\r\n\r\n") == 400);
  CHECK(refused_with("G(T /livez HTTP/1.1\r\n\r\n") == 400);
  CHECK(refused_with("GET /livez HTTP/1.1\r\nNo colon\r\n\r\n") == 400);
  CHECK(refused_with("GET /livez HTTP/1.1\r\nBad Name: x\r\n\r\n") == 400);
  CHECK(refused_with("GET /livez HTTP/1.1\r\nX: a\r\n folded\r\n\r\n") == 400);
  CHECK(refused_with("GET /livez HTTP/1.1\r\nX: a\nY: b\r\n\r\n") == 400);
  CHECK(refused_with("GET /livez HTTP/1.1\r\nX: a\x01\r\n\r\n") == 400);
  CHECK(refused_with("GET /livez HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello") == 413);
  CHECK(refused_with("GET /livez HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n") == 413);
}

TEST_CASE("readyz: starting, ready, stopping, and the queue-time limit") {
  const std::uint64_t ms = 1'000'000;
  CHECK_FALSE(readiness(false, false, -1, 0).ready);
  CHECK(readiness(false, false, -1, 0).why == "starting\n");
  CHECK(readiness(false, true, -1, 0).ready);
  CHECK_FALSE(readiness(true, true, -1, 0).ready);
  CHECK(readiness(true, true, -1, 0).why == "stopping\n");
  // The limit: off by default; on, the newest running request's queue time against it.
  CHECK(readiness(false, true, 900 * ms, 0).ready);
  CHECK(readiness(false, true, 90 * ms, 100 * ms).ready);
  CHECK(readiness(false, true, -1, 100 * ms).ready); // nothing running, or not stamped
  Readiness late = readiness(false, true, 250 * ms, 100 * ms);
  CHECK_FALSE(late.ready);
  CHECK(late.why.find("over ready-max-queue-time") != std::string::npos);
}

TEST_CASE("health answer: status line, length, Connection: close, HEAD without the body") {
  HealthReply reply{503, "text/plain; charset=utf-8", "stopping\n"};
  std::string get = http_response(reply, true);
  CHECK(get.starts_with("HTTP/1.1 503 Service Unavailable\r\n"));
  CHECK(get.find("\r\nContent-Length: 9\r\n") != std::string::npos);
  CHECK(get.find("\r\nConnection: close\r\n") != std::string::npos);
  CHECK(get.ends_with("\r\n\r\nstopping\n"));
  std::string head = http_response(reply, false);
  CHECK(head.ends_with("\r\n\r\n"));
  CHECK(head.find("Content-Length: 9") != std::string::npos);
  CHECK(http_response({405, "text/plain", ""}, true).find("\r\nAllow: GET, HEAD\r\n") !=
        std::string::npos);
}

TEST_CASE("status fields: every row shows in the forms it names, in each of them") {
  Snapshot s;
  s.pool_mode = "dynamic";
  s.pool_name = "api";
  s.threads_total = 4;
  s.threads_busy = 3;
  s.target_workers = 2;
  s.max_workers = 6;
  s.threads_per_worker = 2;
  s.listen_queue.known = true;
  std::string type;
  const std::string text = render_status(s, {StatusFormat::Text, false}, type);
  const std::string json = render_status(s, {StatusFormat::Json, false}, type);
  const std::string om = render_status(s, {StatusFormat::OpenMetrics, false}, type);
  const std::string prom = render_status(s, {StatusFormat::Prometheus, false}, type);
  std::set<std::string_view> families;
  for (const StatusField& f : status_fields()) {
    INFO(f.key, " ", f.metric);
    const FieldValue v = f.value(s);
    if (v.kind == FieldValue::Kind::Absent) continue;
    CHECK(f.key.empty() == !(f.forms & (kTextForm | kJsonForm))); // a page's field has a name
    if (!f.key.empty()) {
      CHECK((text.find("\n" + std::string(f.key) + ":") != std::string::npos ||
             text.starts_with(std::string(f.key) + ":")) == bool(f.forms & kTextForm));
      CHECK((json.find("\"" + std::string(f.key) + "\":") != std::string::npos) ==
            bool(f.forms & kJsonForm));
    }
    if (f.metric.empty()) continue;
    const bool counter = f.kind == MetricKind::Counter;
    const std::string name = "fcgihost_" + std::string(f.metric);
    const std::string sample = (counter ? name + "_total" : name) +
                               (f.labels.empty() ? "" : "{" + std::string(f.labels) + "}") + " " +
                               v.value + "\n";
    CHECK(om.find("\n" + sample) != std::string::npos);
    CHECK(prom.find("\n" + sample) != std::string::npos);
    // A family's HELP and TYPE once, whatever the rows that fill it.
    if (families.insert(f.metric).second) {
      CHECK(om.find("# TYPE " + name + (counter ? " counter" : " gauge")) != std::string::npos);
      CHECK(prom.find("# TYPE " + name + (counter ? "_total counter" : " gauge")) !=
            std::string::npos);
    }
  }
  // The gauges an autoscaler reads: one family each, no arithmetic.
  CHECK(om.find("\nfcgihost_utilization 0.75\n") != std::string::npos);
  CHECK(om.find("\nfcgihost_pm_max_processes 6\n") != std::string::npos);
  CHECK(om.find("\nfcgihost_pm_target_processes 2\n") != std::string::npos);
  CHECK(om.find("\nfcgihost_pm_threads_per_process 2\n") != std::string::npos);
  CHECK(text.find("\nutilization:          0.75\n") != std::string::npos);
  CHECK(json.find("\"utilization\":0.75,") != std::string::npos);
  s.threads_total = 0;
  s.threads_busy = 0;
  CHECK(utilization_text(s) == "0");
}

TEST_CASE("status fields: with pool_label every metrics sample carries pool=\"NAME\" first") {
  Snapshot s;
  s.pool_name = "a\"b";
  RouteSnapshot r;
  r.name = "/x";
  r.calls = 1;
  s.routes.push_back(r);
  WorkerSnapshot w;
  s.workers.push_back(w);
  StatusQuery q{StatusFormat::Prometheus, false, true};
  std::string type;
  std::istringstream lines(render_status(s, q, type));
  int samples = 0;
  for (std::string line; std::getline(lines, line);) {
    if (line.empty() || line.starts_with("#")) continue;
    ++samples;
    INFO(line);
    CHECK(line.find("{pool=\"a\\\"b\"") != std::string::npos);
  }
  CHECK(samples > 40);
}
