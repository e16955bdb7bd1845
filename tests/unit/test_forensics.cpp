// Request ids (carried, from traceparent, made up), the access log's %I, %{NAME}e and %{Name}o,
// the scoreboard's copy of the id, and the master's crash block and stack trimming.
#include "app/host_access.hpp"
#include "app/request.hpp"
#include "app/response.hpp"
#include "fcgi_host/observe/access_log.hpp"
#include "fcgi_host/observe/metrics.hpp"
#include "fcgi_host/observe/status_page.hpp"
#include "process_manager/clock.hpp"
#include "process_manager/crash_report.hpp"
#include "process_manager/request_id.hpp"
#include "process_manager/scoreboard.hpp"

#include <doctest/doctest.h>
#include <string>

using namespace process_manager;

namespace {

// A request as the host decodes it, with these extra parameters.
void fill(app::Request& r, std::initializer_list<std::pair<const char*, const char*>> params) {
  r.clear();
  r.add_param("REQUEST_METHOD", "GET");
  r.add_param("REQUEST_URI", "/x");
  for (auto& [name, value] : params)
    r.add_param(name, value);
  r.finish_params();
}

int formats = 0; // how often the id source was asked

void number_seven(const void*, char* out) {
  ++formats;
  format_generated_id(0xabcdef, 7, out);
}

constexpr const char* kTraceParent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

} // namespace

TEST_CASE("generated request ids: 16 hex digits of prefix, 16 of number") {
  char out[kGeneratedIdSize];
  format_generated_id(0x0123456789abcdefu, 0x2a, out);
  CHECK(std::string(out, sizeof out) == "0123456789abcdef000000000000002a");
  CHECK(random_id_prefix() != 0);
}

TEST_CASE("request id: X-Request-Id, else traceparent's trace id, else made up once, lazily") {
  app::Request r;
  app::HostAccess::set_id_source(r, number_seven, nullptr);
  fill(r, {{"HTTP_X_REQUEST_ID", "abc"}, {"HTTP_TRACEPARENT", kTraceParent}});
  CHECK(r.request_id() == "abc");
  CHECK(r.carried_id() == "abc");
  CHECK(r.trace_parent() == kTraceParent);
  CHECK(r.trace_id() == "4bf92f3577b34da6a3ce929d0e0e4736");
  fill(r, {{"HTTP_TRACEPARENT", kTraceParent}});
  CHECK(r.request_id() == "4bf92f3577b34da6a3ce929d0e0e4736");
  formats = 0;
  fill(r, {});
  CHECK(r.carried_id().empty());
  CHECK(formats == 0); // nothing formatted until asked
  CHECK(r.request_id() == "0000000000abcdef0000000000000007");
  CHECK(r.request_id() == "0000000000abcdef0000000000000007");
  CHECK(formats == 1);
  fill(r, {});
  r.request_id();
  CHECK(formats == 2); // a new request, a new id
  app::Request bare;   // no host gave it a source
  fill(bare, {});
  CHECK(bare.request_id().empty());
}

TEST_CASE("traceparent: malformed ones give no trace id") {
  app::Request r;
  for (const char* bad : {
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",    // short
           "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", // upper case
           "00-00000000000000000000000000000000-00f067aa0ba902b7-01", // zero trace id
           "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", // zero parent id
           "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", // version ff
           "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01x",
       }) {
    fill(r, {{"HTTP_TRACEPARENT", bad}});
    CAPTURE(bad);
    CHECK(r.trace_id().empty());
    CHECK(r.trace_parent() == bad);
  }
  // A later version may add fields after a '-'.
  fill(r, {{"HTTP_TRACEPARENT", "01-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-xyz"}});
  CHECK(r.trace_id() == "4bf92f3577b34da6a3ce929d0e0e4736");
}

TEST_CASE("access log: %I, %{NAME}e for a parameter, %{Name}o for a response header") {
  fcgi_host::AccessLog& log = fcgi_host::AccessLog::get();
  log.open("", "%I %{HTTP_HOST}e %{Content-Type}o %{X-None}o %{HTTP_NONE}e %%{x}e");
  app::Request req;
  fill(req, {{"HTTP_X_REQUEST_ID", "rid-1"}, {"HTTP_HOST", "example.org"}});
  app::Response res;
  res.set_header("content-type", "text/plain");
  fcgi_host::AccessLog::Entry e;
  e.request = &req;
  e.response = &res;
  CHECK(log.format_line(e) == "rid-1 example.org text/plain - - %{x}e");
  e.request = nullptr;
  e.response = nullptr;
  CHECK(log.format_line(e) == "- - - - - %{x}e");
  std::string why;
  CHECK_FALSE(fcgi_host::valid_access_format("%{HTTP_HOST}", why));
  CHECK(why.find("%{HTTP_HOST}e") != std::string::npos);
  CHECK_FALSE(fcgi_host::valid_access_format("%{}e", why));
  CHECK_FALSE(fcgi_host::valid_access_format("%{HTTP_HOST}x", why));
  CHECK_FALSE(fcgi_host::valid_access_format("%{HTTP_HOST", why));
  CHECK(fcgi_host::valid_access_format("%I %{A}e%{B}o", why));
}

TEST_CASE("scoreboard: the carried request id, cleaned, else the generated one") {
  Scoreboard sb(1);
  WorkerSlot& s = sb.slot(0);
  Scoreboard::set_request(s, "GET", 3, "/a", 2, "id\nwith\x01junk");
  CHECK(std::string(Scoreboard::read_request(s).request_id) == "id?with?junk");
  CHECK(std::string(Scoreboard::read_request(s).request_id).size() < kSlotRequestIdSize);
  s.id_prefix = 0xabcdef;
  s.request_number = 7;
  Scoreboard::set_request(s, "GET", 3, "/a", 2);
  CHECK(std::string(Scoreboard::read_request(s).request_id) == "0000000000abcdef0000000000000007");
}

TEST_CASE("crash block: the request in flight with route, id, run time and queue time") {
  Scoreboard sb(1);
  WorkerSlot& s = sb.slot(0);
  s.state = WorkerState::Starting;
  CHECK(describe_crash(s, 0, "stack:\n#0 f") ==
        "  no request in flight: the worker was starting (on_worker_start or earlier)\n"
        "  stack:\n  #0 f");
  s.state = WorkerState::Handling;
  Scoreboard::set_request(s, "POST", 4, "/u?x", 4, "rid");
  std::string route = "POST /u";
  route.copy(s.crash_route, route.size());
  s.request_start_ns = 1'000'000;
  s.crash_ns = 13'500'000;
  s.queue_ns = 2'000'000;
  CHECK(describe_crash(s, 99'000'000'000, "x") ==
        "  request in flight: \"POST /u?x\", route \"POST /u\", request id rid, running for "
        "12.5 ms, queue time 2.0 ms\n  x");
}

TEST_CASE("worker stacks: the crash handler's frames and the master's from before the fork go") {
  std::string stack = "#0  0x1 __GI___clock_nanosleep\n"
                      "    clock_nanosleep.c:48:7\n"
                      "#1  0x2 fcgi_host_fatal_signal_handler\n"
                      "    crash_report.cpp:63:16\n"
                      "#2  0x3 __restore_rt\n"
                      "#3  0x4 crash_in_named_function\n"
                      "    crash_plugin.cpp:21:12\n"
                      "#4  0x5 fcgi_host::run_worker(...)\n"
                      "#5  0x6 process_manager::Spawner::run_child(...)\n"
                      "    spawner.cpp:71:23\n"
                      "#6  0x7 main\n";
  CHECK(worker_frames(stack) == "#3  0x4 crash_in_named_function\n"
                                "    crash_plugin.cpp:21:12\n"
                                "#4  0x5 fcgi_host::run_worker(...)\n");
  // gdb's frames: the trampoline is "<signal handler called>".
  CHECK(worker_frames("#0  0x1 in fcgi_host_fatal_signal_handler ()\n"
                      "#1  <signal handler called>\n"
                      "#2  0x4 in crash_in_named_function ()\n") ==
        "#2  0x4 in crash_in_named_function ()\n");
  // A stack without either (a slow request's, another program's) is kept as it is above them.
  CHECK(worker_frames("#0  0x1 f\n#1  0x2 g\n") == "#0  0x1 f\n#1  0x2 g\n");
  CHECK(worker_frames("no stack trace: no debugger installed\n") ==
        "no stack trace: no debugger installed\n");
}

TEST_CASE("exemplars: a bucket's trace id (or request id) in OpenMetrics only, refreshed at most "
          "once a second") {
  Scoreboard sb(1);
  sb.slot(0).generation = 1;
  sb.slot(0).state = WorkerState::Idle;
  fcgi_host::ObservabilitySettings settings;
  fcgi_host::RequestMetrics m(sb.slot(0), sb.routes(0), settings);
  app::Request r;
  app::HostAccess::set_id_source(r, number_seven, nullptr);
  fill(r, {{"HTTP_TRACEPARENT", kTraceParent}});
  m.begin(process_manager::monotonic_ns());
  m.end("/a", 200, r, false);
  fill(r, {{"HTTP_X_REQUEST_ID", "second"}}); // the same bucket, within the second: not taken
  m.begin(process_manager::monotonic_ns());
  m.end("/a", 200, r, false);
  fill(r, {{"HTTP_X_REQUEST_ID", "slow-one"}});
  m.begin(process_manager::monotonic_ns() - 30'000'000); // 30 ms ago: another bucket
  m.end("/a", 200, r, false);
  fcgi_host::Snapshot s = fcgi_host::take_snapshot(sb, -1, "static");
  std::string type;
  std::string om = fcgi_host::render_status(s, {fcgi_host::StatusFormat::OpenMetrics, false}, type);
  INFO(om);
  CHECK(om.find("le=\"0.001\"} 2 # {trace_id=\"4bf92f3577b34da6a3ce929d0e0e4736\"} 0.0") !=
        std::string::npos);
  CHECK(om.find("le=\"0.05\"} 3 # {request_id=\"slow-one\"} 0.03") != std::string::npos);
  CHECK(om.find("\"second\"") == std::string::npos);
  std::string prom =
      fcgi_host::render_status(s, {fcgi_host::StatusFormat::Prometheus, false}, type);
  CHECK(prom.find("# {") == std::string::npos); // the 0.0.4 text format has no exemplars
}
