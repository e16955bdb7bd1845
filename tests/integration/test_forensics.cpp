// When a request goes wrong, the log says which one and where: a crashed worker's block (the
// request in flight, its route and id, the native stack down to the plugin's function), the same
// for abort() and for a crash with no request (on_worker_start), bounded in a crash loop; one
// stack of a slow request that still answers 200; nginx's request id in the access log, the slow
// log and the crash block; %{NAME}e in the access log.
#include "checks.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstring>
#include <future>
#include <regex>
#include <string>
#include <vector>

using namespace std::chrono_literals;
using fcgi_test::Millis;
using it::HostOptions;
using it::HostProcess;

using it::kCrashPlugin;

namespace {

// Sends GET `uri` with X-Request-Id `id` on a connection of its own; the worker may die on it.
fcgi_test::Response send_with_id(const HostProcess& host, const std::string& uri,
                                 const std::string& id, Millis timeout = Millis{5000}) {
  auto c = host.connect();
  c.set_keep_conn(false);
  c.set_timeout(timeout);
  fcgi_test::Request r;
  r.uri = uri;
  r.extra_params = {{"HTTP_X_REQUEST_ID", id}};
  return c.request(r);
}

// The crash block: the exit line of a worker killed by `signal` and the lines after it, up to
// the next log line (which starts with the date).
std::string crash_block(const std::string& log, int signal) {
  // A crash after ready says "killed by signal 11 (...)"; one before, a boot failure, "died of
  // SIGSEGV before it was ready".
  std::size_t at = log.find("killed by signal " + std::to_string(signal));
  if (at == std::string::npos) at = log.find(std::string("died of SIG") + sigabbrev_np(signal));
  if (at == std::string::npos) return {};
  std::size_t end = at;
  std::regex next_line(R"(\n[0-9]{4}-[0-9]{2}-[0-9]{2} )");
  std::smatch m;
  std::string rest = log.substr(at);
  end =
      std::regex_search(rest, m, next_line) ? static_cast<std::size_t>(m.position(0)) : rest.size();
  return rest.substr(0, end);
}

// The exemplars prometheus_client's OpenMetrics parser finds in `text`, one per line
// ("sample le labels value"), or its error.
std::string parsed_exemplars(const it::TempDir& dir, const std::string& text) {
  std::string input = dir.write("om.txt", text);
  std::string script = dir.write("exemplars.py", R"(import sys
from prometheus_client.openmetrics.parser import text_string_to_metric_families
for f in text_string_to_metric_families(open(sys.argv[1]).read()):
    for s in f.samples:
        if s.exemplar:
            print(s.name, s.labels.get("le"), dict(s.exemplar.labels), s.exemplar.value)
)");
  std::string out;
  FILE* p = popen(("/usr/bin/python3 " + script + " " + input + " 2>&1").c_str(), "r");
  if (!p) return "popen failed";
  char buf[4096];
  for (std::size_t n; (n = fread(buf, 1, sizeof buf, p)) > 0;)
    out.append(buf, n);
  pclose(p);
  return out;
}

using it::has;

} // namespace

TEST_SUITE("forensics") {
  TEST_CASE("a null dereference in a handler: the block names URI, route, request id and the "
            "function, within the stack's time budget") {
    HostProcess host({"--app", kCrashPlugin, "--workers", "1"});
    auto before = host.wait_workers(1);
    REQUIRE(before.size() == 1);
    auto sent = std::chrono::steady_clock::now();
    fcgi_test::Response r = send_with_id(host, "/crash/segv?x=1", "it-crash-1");
    CHECK_FALSE(r.ended); // the worker died mid-request
    // Quiet, it takes well under a second; the master gives the debugger 3 s at most
    // (kForensicStackBudget), and a loaded machine may need them.
    REQUIRE(host.wait_log("crash_in_named_function", Millis{5000}));
    CHECK(std::chrono::steady_clock::now() - sent < 4s);
    std::string block = crash_block(host.log(), SIGSEGV);
    INFO("block:\n" << block);
    CHECK(has(block, "request in flight: \"GET /crash/segv?x=1\""));
    CHECK(has(block, "route \"GET /crash/segv\""));
    CHECK(has(block, "request id it-crash-1"));
    CHECK(has(block, "crash_plugin.cpp:")); // file:line from the fixture's debug info
    // The handler's own frames are left out: the first frame is the faulting one.
    CHECK_FALSE(has(block, "fcgi_host_fatal_signal_handler"));
    std::size_t first_frame = block.find("#");
    REQUIRE(first_frame != std::string::npos);
    CHECK(has(block.substr(first_frame, block.find('\n', first_frame) - first_frame),
              "crash_in_named_function"));
    // The worker died of its signal and was replaced; the host serves on.
    REQUIRE(host.wait_worker_replaced(before[0], 1).size() == 1);
    CHECK(send_with_id(host, "/id", "after").status == 200);
  }

  TEST_CASE("abort() in a handler: the block names the request and abort_in_named_function") {
    HostProcess host({"--app", kCrashPlugin, "--workers", "1"});
    REQUIRE(host.wait_workers(1).size() == 1);
    CHECK_FALSE(send_with_id(host, "/crash/abort", "it-abort-1").ended);
    REQUIRE(host.wait_log("abort_in_named_function", Millis{2000}));
    std::string block = crash_block(host.log(), SIGABRT);
    INFO("block:\n" << block);
    CHECK(has(block, "request in flight: \"GET /crash/abort\""));
    CHECK(has(block, "route \"GET /crash/abort\""));
    CHECK(has(block, "request id it-abort-1"));
  }

  TEST_CASE("a crash of GET /crash/segv?password=…&api_token=…: the block shows the query's "
            "secrets redacted as captures do, with --threads 1 and 2") {
    for (const char* threads : {"1", "2"}) {
      INFO("--threads " << threads);
      HostProcess host({"--app", kCrashPlugin, "--workers", "1", "--threads", threads});
      REQUIRE(host.wait_workers(1).size() == 1);
      CHECK_FALSE(
          send_with_id(host, "/crash/segv?page=2&password=hunter2&api_token=s3cr3t", "it-redact")
              .ended);
      REQUIRE(host.wait_log("crash_in_named_function", Millis{5000}));
      std::string block = crash_block(host.log(), SIGSEGV);
      INFO("block:\n" << block);
      CHECK(has(block, "\"GET /crash/segv?page=2&password=xxxxxxx&api_token=xxxxxx\""));
      CHECK_FALSE(has(host.log(), "hunter2"));
      CHECK_FALSE(has(host.log(), "s3cr3t"));
    }
  }

  TEST_CASE("with --metrics off the block still names the request") {
    HostProcess host({"--app", kCrashPlugin, "--workers", "1", "--metrics", "off"});
    REQUIRE(host.wait_workers(1).size() == 1);
    CHECK_FALSE(send_with_id(host, "/crash/segv", "it-nometrics-1").ended);
    REQUIRE(host.wait_log("crash_in_named_function", Millis{3000}));
    CHECK(has(crash_block(host.log(), SIGSEGV),
              "request in flight: \"GET /crash/segv\", route \"GET /crash/segv\", request id "
              "it-nometrics-1"));
  }

  TEST_CASE("a SIGKILL the master did not send (the OOM killer's) names the request, no stack") {
    HostOptions o;
    o.args = {"--app", kCrashPlugin, "--workers", "1"};
    o.status_socket = true;
    HostProcess host(o);
    auto workers = host.wait_workers(1);
    REQUIRE(workers.size() == 1);
    auto c = host.connect();
    fcgi_test::Request r;
    r.uri = "/slow?ms=5000";
    r.extra_params = {{"HTTP_X_REQUEST_ID", "it-killed-1"}};
    c.send_request(r);
    REQUIRE(host.wait_serving("/slow?ms=5000"));
    ::kill(workers[0], SIGKILL);
    REQUIRE(host.wait_log("killed by signal 9", Millis{3000}));
    std::string block = crash_block(host.log(), SIGKILL);
    INFO("block:\n" << block);
    CHECK(has(block, "request in flight: \"GET /slow?ms=5000\", request id it-killed-1"));
    CHECK(has(block, "SIGKILL, not sent by the master"));
  }

  TEST_CASE("a stack overflow in a handler still gets its block (the handler's own stack)") {
    HostProcess host({"--app", kCrashPlugin, "--workers", "1"});
    REQUIRE(host.wait_workers(1).size() == 1);
    CHECK_FALSE(send_with_id(host, "/crash/stack", "it-overflow-1").ended);
    REQUIRE(host.wait_log("recurse_without_end", Millis{3000}));
    std::string block = crash_block(host.log(), SIGSEGV);
    INFO("block:\n" << block);
    CHECK(has(block, "request in flight: \"GET /crash/stack\", route \"GET /crash/stack\", "
                     "request id it-overflow-1"));
  }

  TEST_CASE("a crash in on_worker_start: the block says no request was in flight, and where") {
    // Whatever the master then decides about the pool (respawn with backoff, or stop), the
    // block is written.
    HostOptions o;
    o.args = {"--app", kCrashPlugin, "--workers", "1", "--env", "CRASH_PLUGIN_CRASH_AT_START=1"};
    o.wait_ready = false;
    o.allow_log = {"failed to boot", "crash loop"};
    HostProcess host(o);
    REQUIRE(host.wait_log("crash_in_worker_start", Millis{15000}));
    std::string block = crash_block(host.log(), SIGSEGV);
    INFO("block:\n" << block);
    CHECK(has(block, "no request in flight: the worker was starting"));
    CHECK(has(block, "crash_in_named_function"));
  }

  TEST_CASE("a crash loop writes bounded blocks: at most one stack a second") {
    HostOptions o;
    o.args = {"--app", kCrashPlugin, "--workers", "2"};
    o.status_socket = true;
    o.allow_log = {"crash loop"};
    HostProcess host(o);
    REQUIRE(host.wait_workers(2).size() == 2);
    auto start = std::chrono::steady_clock::now();
    // Bounded in count and time: each crashing request on its own connection, from three
    // senders, so that a burst happens however slowly a loaded machine respawns (one at a time,
    // each request could wait out a respawn, and the burst would be two crashes).
    std::atomic<int> sent{0};
    std::vector<std::future<void>> senders;
    for (int i = 0; i < 3; ++i) {
      senders.push_back(std::async(std::launch::async, [&] {
        for (int n;
             (n = sent.fetch_add(1)) < 12 && std::chrono::steady_clock::now() - start < 4s;) {
          try {
            send_with_id(host, "/crash/segv", "loop-" + std::to_string(n), Millis{3000});
          } catch (const fcgi_test::Error&) {
            // a worker not respawned yet (backoff): the connection waits, then times out
          }
        }
      }));
    }
    for (auto& s : senders)
      s.get();
    const int requests = std::min(sent.load(), 12);
    REQUIRE(host.wait_log("killed by signal 11", Millis{3000}));
    REQUIRE(host.wait_master_turn());
    double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::string log = host.log();
    INFO("sent " << requests << " crashing requests in " << elapsed << " s; log:\n" << log);
    std::size_t stacks = it::lines_with(log, "crash_in_named_function").size();
    std::size_t exit_lines = it::lines_with(log, "killed by signal 11").size();
    CHECK(stacks >= 1);
    CHECK(stacks <= exit_lines);
    CHECK(static_cast<double>(stacks) <= elapsed + 1.0); // the debugger: one a second
    // The crash lines: the first three of a burst, then one a second.
    CHECK(static_cast<double>(exit_lines) <= 3 + elapsed + 1.0);
    CHECK(exit_lines < static_cast<std::size_t>(requests)); // the others are counted, not written
    // ...in a line of their own, on the master's timer.
    CHECK(host.wait_log(R"(more crash(es)? suppressed \(crash lines are rate-limited)",
                        Millis{8000}));
  }

  TEST_CASE("a slow request past --slow-request-threshold: one stack while it runs, then 200") {
    HostOptions o;
    o.args = {"--app", kCrashPlugin, "--workers", "1", "--slow-request-threshold", "0.3"};
    o.status_socket = true;
    HostProcess host(o);
    fcgi_test::Response r = send_with_id(host, "/slow?ms=1200", "it-slow-1");
    CHECK(r.status == 200);
    CHECK(r.body == "slow done\n");
    REQUIRE(host.wait_log(R"(slow request: "GET /slow\?ms=1200" took .*request id it-slow-1)"));
    REQUIRE(host.wait_master_turn());
    std::string log = host.log();
    INFO("log:\n" << log);
    auto stacks = it::lines_with(log, "slow request in flight");
    REQUIRE(stacks.size() == 1); // one per request, though it ran four thresholds long
    CHECK(has(stacks[0], "\"GET /slow?ms=1200\", request id it-slow-1"));
    CHECK(has(log, "sleep_in_named_function"));
  }

  TEST_CASE("nginx's request id is in the access log, the slow log and the crash block") {
    HostOptions o;
    o.args = {"--app",
              kCrashPlugin,
              "--workers",
              "1",
              "--slow-request-threshold",
              "0.3",
              "--access-log",
              "{dir}/access.log",
              "--access-format",
              "%m %u %s id=%I host=%{HTTP_HOST}e type=%{Content-Type}o"};
    HostProcess host(o);
    it::NginxProcess nginx({host.address()});

    it::HttpResponse slow = it::http_request(nginx.port(), "GET", "/slow?ms=700");
    CHECK(slow.status == 200);
    std::string slow_id = slow.header("X-Request-Id").value_or("");
    REQUIRE(slow_id.size() == 32);
    it::HttpResponse crash = it::http_request(nginx.port(), "GET", "/crash/segv");
    CHECK(crash.status == 502);
    std::string crash_id = crash.header("X-Request-Id").value_or("");
    REQUIRE(crash_id.size() == 32);

    std::string access = host.dir().file("access.log");
    REQUIRE(it::wait_for([&] { return has(it::read_file(access), slow_id); }, Millis{2000}));
    CHECK(has(it::read_file(access),
              "GET /slow?ms=700 200 id=" + slow_id + " host=localhost type=text/plain"));
    REQUIRE(host.wait_log("request id " + crash_id, Millis{2000}));
    std::string log = host.log();
    INFO("log:\n" << log);
    CHECK(has(crash_block(log, SIGSEGV), "request id " + crash_id));
    CHECK(it::lines_with(log, "slow request in flight").size() == 1);
    CHECK(has(it::lines_with(log, "slow request in flight")[0], "request id " + slow_id));
    CHECK(has(it::lines_with(log, "slow request: ")[0], "request id " + slow_id));
  }

  TEST_CASE("the request id a handler sees: X-Request-Id, else traceparent's trace id, else made "
            "up") {
    HostProcess host({"--app", kCrashPlugin, "--workers", "1"});
    CHECK(send_with_id(host, "/id", "given-1").body == "id=given-1 traceparent=\n");
    auto c = host.connect();
    fcgi_test::Request r;
    r.uri = "/id";
    std::string tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";
    r.extra_params = {{"HTTP_TRACEPARENT", tp}};
    CHECK(c.request(r).body == "id=4bf92f3577b34da6a3ce929d0e0e4736 traceparent=" + tp + "\n");
    std::string made_up = host.connect().request("GET", "/id").body;
    CHECK(std::regex_match(made_up, std::regex("id=[0-9a-f]{32} traceparent=\n")));
    CHECK(host.connect().request("GET", "/id").body != made_up); // one per request
  }

  TEST_CASE("exemplars: a traceparent request's trace id on its latency bucket passes the "
            "OpenMetrics parser") {
    HostOptions o;
    o.args = {"--app", kCrashPlugin, "--workers", "1"};
    o.status_socket = true;
    HostProcess host(o);
    auto c = host.connect();
    fcgi_test::Request r;
    r.uri = "/id";
    r.extra_params = {
        {"HTTP_TRACEPARENT", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}};
    CHECK(c.request(r).status == 200);
    std::string text;
    // The worker records the call after its answer went out.
    it::wait_for(
        [&] {
          auto status = fcgi_test::Client::connect("unix:" + host.dir().file("status.sock"));
          text = status.request("GET", "/status?openmetrics").body;
          return has(text, "4bf92f3577b34da6a3ce929d0e0e4736");
        },
        Millis{3000});
    std::string parsed = parsed_exemplars(host.dir(), text);
    INFO(text);
    INFO(parsed);
    CHECK(has(parsed, "fcgihost_handler_duration_seconds_bucket"));
    CHECK(has(parsed, "{'trace_id': '4bf92f3577b34da6a3ce929d0e0e4736'}"));
    CHECK_FALSE(has(parsed, "Traceback"));
  }
}
