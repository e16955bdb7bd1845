// Observability of a running host: the status page's numbers are exact (the page never counts
// itself), per-handler metrics survive recycling and reloads, OpenMetrics output passes a real
// parser, the listen queue of a Unix socket is reported, the slow log, ping, --status-allow,
// the access log with USR1, the `fcgi-host status|ping` health-check exit codes, and the
// processes' memory (PSS).
#include "checks.hpp"
#include "commands.hpp"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <regex>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace std::chrono_literals;
using fcgi_test::Millis;
using it::Command;
using it::HostOptions;
using it::HostProcess;
using it::json_number;
using it::Listen;
using it::parse_openmetrics;
using it::run_binary;
using it::run_shell;

namespace {

// The master's own status socket in the host's temp dir.
std::string status_socket(const HostProcess& host) {
  return "unix:" + host.dir().file("status.sock");
}

fcgi_test::Response get(const std::string& address, const std::string& uri) {
  auto c = fcgi_test::Client::connect(address);
  c.set_keep_conn(false);
  return c.request("GET", uri);
}

// Every "pss bytes" figure of a JSON page, in order: the pool's total first, then each worker's
// (the full page lists the processes after the pool fields).
std::vector<long> pss_figures(const std::string& json) {
  std::vector<long> out;
  std::regex re("\"pss bytes\":([0-9]+)");
  for (auto it = std::sregex_iterator(json.begin(), json.end(), re); it != std::sregex_iterator();
       ++it)
    out.push_back(std::stol((*it)[1]));
  return out;
}

// Sends requests that stay in the handler for `ms`; returns the open clients (keep them alive).
// The host needs its status socket: each request is sent once the previous one is inside its
// handler, so each lands on a different worker.
std::vector<fcgi_test::Client> hold_requests(const HostProcess& host, int n, int ms) {
  std::vector<fcgi_test::Client> held;
  for (int i = 0; i < n; ++i) {
    held.push_back(host.connect());
    fcgi_test::Request r;
    r.uri = "/echo?delay_ms=" + std::to_string(ms);
    held.back().send_request(r);
    REQUIRE(host.wait_active(i + 1));
  }
  return held;
}

} // namespace

TEST_SUITE("observability") {

  TEST_CASE("N requests held in handlers show exactly N active, W - N idle, the page never "
            "counts itself") {
    const int W = 3, N = 2;
    HostProcess host({"--app", "echo", "--workers", std::to_string(W), "--status-path", "/status",
                      "--status-listen", "unix:{dir}/status.sock"});
    REQUIRE(host.wait_workers(W).size() == W);
    auto held = hold_requests(host, N, 2000);
    // From the master's socket: it waits until both requests are inside handlers.
    std::string json = host.wait_status("active processes", N, Millis{1500});
    REQUIRE(!json.empty());
    CHECK(json_number(json, "idle processes") == W - N);
    CHECK(json_number(json, "total processes") == W);
    // From the worker that serves the page: the same numbers, itself counted idle.
    fcgi_test::Response r = host.connect().request("GET", "/status?json&full");
    INFO(r.body);
    CHECK(r.status == 200);
    CHECK(r.header("Content-Type").value_or("") == "application/json");
    CHECK(json_number(r.body, "active processes") == N);
    CHECK(json_number(r.body, "idle processes") == W - N);
    CHECK(r.body.find("\"request uri\":\"/echo?delay_ms=2000\"") != std::string::npos);
    for (auto& c : held)
      c.read_response(1);
    CHECK(host.wait_active(0)); // the workers leave their request once the answer is written
    json = get(status_socket(host), "/status?json").body;
    CHECK(json_number(json, "max active processes") >= N);
    it::check_no_alerts(host);
  }

  TEST_CASE("per-handler counts are exact across workers, a recycled worker and a reload, "
            "OpenMetrics passes a real parser") {
    const int W = 2, K1 = 40, K2 = 25;
    HostProcess host({"--app", "echo", "--workers", std::to_string(W), "--max-requests", "15",
                      "--status-listen", "unix:{dir}/status.sock"});
    REQUIRE(host.wait_workers(W).size() == W);
    for (int i = 0; i < K1; ++i)
      REQUIRE(get(host.address(), "/a?i=" + std::to_string(i)).status == 200);
    REQUIRE(get(host.address(), "/throw").status == 500);
    auto before = host.wait_workers(W);
    host.signal(SIGHUP);
    REQUIRE(it::wait_for(
        [&] {
          auto now = host.worker_pids();
          if (now.size() != static_cast<std::size_t>(W)) return false;
          for (pid_t p : now)
            for (pid_t b : before)
              if (p == b) return false;
          return true;
        },
        Millis{10000}));
    for (int i = 0; i < K2; ++i)
      REQUIRE(get(host.address(), "/a").status == 200);

    // A worker counts a request after its answer went out: the last one may still be on its way
    // into the scoreboard when the client has its answer.
    std::string text;
    it::wait_for(
        [&] {
          text = get(status_socket(host), "/status?openmetrics").body;
          return text.find("fcgihost_handler_calls_total{route=\"ANY /*\"} " +
                           std::to_string(K1 + K2) + "\n") != std::string::npos;
        },
        Millis{5000});
    std::string out =
        parse_openmetrics(host.dir(), text, "fcgihost_handler_calls_total{route=\"ANY /*\"}");
    INFO(text);
    INFO(out);
    // Keyed by the echo app's routes (its catch-all and /throw), not by the paths sent.
    CHECK(out.find("VALUE " + std::to_string(K1 + K2) + "\n") != std::string::npos);
    CHECK(out.find("fcgihost_handler_duration_seconds histogram") != std::string::npos);
    CHECK(out.find("EXIT") == std::string::npos);
    CHECK(parse_openmetrics(host.dir(), text, "fcgihost_handler_errors_total{route=\"ANY /throw\"}")
              .find("VALUE 1\n") != std::string::npos);
    CHECK(parse_openmetrics(host.dir(), text, "fcgihost_requests_total")
              .find("VALUE " + std::to_string(K1 + K2 + 1) + "\n") != std::string::npos);
    // Recycled workers (--max-requests) exit 0: counted as restarts, and by their reason.
    CHECK(text.find("fcgihost_worker_exits_total{reason=\"exit\",code=\"0\"}") !=
          std::string::npos);
    CHECK(text.find("\nfcgihost_worker_restarts_total ") != std::string::npos);
    CHECK(text.find("fcgihost_worker_requests_total{slot=\"") != std::string::npos);
    CHECK(it::ends_with(text, "# EOF\n"));
  }

  TEST_CASE("a Prometheus scrape: the Accept header chooses the format, the query still wins") {
    // What Prometheus 2.x sends on every scrape.
    const std::string prometheus_accept =
        "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;"
        "q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    HostProcess host({"--app", "echo", "--workers", "2", "--status-path", "/metrics",
                      "--status-listen", "unix:{dir}/status.sock"});
    REQUIRE(host.wait_workers(2).size() == 2);
    for (int i = 0; i < 3; ++i)
      REQUIRE(get(host.address(), "/a").status == 200);
    // Counted once the answer went out: wait until the third is in.
    REQUIRE(!host.wait_status([](const std::string& json) { return it::has(json, "\"+Inf\":3}"); },
                              Millis{3000})
                 .empty());
    auto scrape = [&](const std::string& address, const std::string& uri,
                      const std::string& accept) {
      auto c = fcgi_test::Client::connect(address);
      c.set_keep_conn(false);
      fcgi_test::Request r;
      r.uri = uri;
      r.extra_params = {{"HTTP_ACCEPT", accept}};
      return c.request(r);
    };
    for (const std::string& address : {host.address(), status_socket(host)}) {
      CAPTURE(address);
      fcgi_test::Response om = scrape(address, "/metrics", prometheus_accept);
      INFO(om.body);
      CHECK(om.header("Content-Type")
                .value_or("")
                .starts_with("application/openmetrics-text; version=1.0.0"));
      CHECK(om.header("X-Fcgi-Host").has_value());
      std::string parsed =
          parse_openmetrics(host.dir(), om.body, "fcgihost_aborted_requests_total");
      INFO(parsed);
      CHECK(parsed.find("VALUE 0\n") != std::string::npos);
      CHECK(parsed.find("EXIT") == std::string::npos);
      // Worker series by slot, never by pid (a recycled worker would start new series).
      CHECK(om.body.find("fcgihost_worker_requests_total{slot=\"") != std::string::npos);
      CHECK(om.body.find("pid=\"") == std::string::npos);
      CHECK(om.body.find("\nfcgihost_worker_restarts_total 0\n") != std::string::npos);

      fcgi_test::Response text = scrape(address, "/metrics", "text/plain;version=0.0.4");
      CHECK(text.header("Content-Type").value_or("").starts_with("text/plain; version=0.0.4"));
      std::string parsed_text = parse_openmetrics(
          host.dir(), text.body, "fcgihost_handler_calls_total{route=\"ANY /*\"}", true);
      INFO(text.body);
      INFO(parsed_text);
      CHECK(parsed_text.find("VALUE 3\n") != std::string::npos);
      CHECK(parsed_text.find("EXIT") == std::string::npos);
      CHECK(text.body.find("# EOF") == std::string::npos);

      fcgi_test::Response json = scrape(address, "/metrics?json", prometheus_accept);
      CHECK(json.header("Content-Type").value_or("") == "application/json");
      CHECK(json_number(json.body, "worker restarts") == 0);
      CHECK(json_number(json.body, "aborted requests") == 0);
      // Cumulative buckets: the +Inf bucket holds every call.
      CHECK(json.body.find("\"+Inf\":3}") != std::string::npos);

      fcgi_test::Response plain = scrape(address, "/metrics", "*/*");
      CHECK(plain.header("Content-Type").value_or("") == "text/plain");
      CHECK(plain.body.find("aborted requests:") != std::string::npos);
    }
    it::check_no_alerts(host);
  }

  TEST_CASE("the listen queue of a Unix socket: K unaccepted connections show as K") {
    const int K = 3;
    HostProcess host(
        {"--app", "echo", "--workers", "1", "--status-listen", "unix:{dir}/status.sock"});
    REQUIRE(host.wait_workers(1).size() == 1);
    auto held = hold_requests(host, 1, 2000);
    REQUIRE(!host.wait_status("active processes", 1, Millis{1500}).empty());
    std::vector<int> queued;
    for (int i = 0; i < K; ++i)
      queued.push_back(fcgi_test::connect_socket(host.address()));
    std::string json = get(status_socket(host), "/status?json").body;
    INFO(json);
    CHECK(json_number(json, "listen queue") == K);
    CHECK(json_number(json, "listen queue len") > 0);
    CHECK(json_number(json, "idle processes") == 0);
    // The health check: no idle worker and more than --max-queue waiting is unhealthy.
    Command unhealthy = run_binary("status --connect " + status_socket(host) + " --max-queue 2");
    CHECK(unhealthy.status == 1);
    CHECK(unhealthy.output.find("3 connections waiting") != std::string::npos);
    CHECK(run_binary("status --connect " + status_socket(host) + " --max-queue 3").status == 0);
    for (int fd : queued)
      ::close(fd);
    held[0].read_response(1);
  }

  TEST_CASE("a slow request is logged at warn with its URI, and counted") {
    HostProcess host({"--app", "echo", "--workers", "1", "--slow-request-threshold", "0.2",
                      "--status-path", "/status"});
    CHECK(host.connect().request("GET", "/echo?delay_ms=300&tag=slowone").status == 200);
    CHECK(host.connect().request("GET", "/echo?fast=1").status == 200);
    // The worker's line when the request ends ("slow request: ..."), once per slow request. The
    // master may also have logged it in flight with its stack ("slow request in flight: ...",
    // when its loop looked during the 100 ms the request ran past the threshold), and on a
    // loaded machine the "fast" request may be slow too: each is logged and counted.
    const std::string slowone = "slow request: \"GET /echo?delay_ms=300&tag=slowone\"";
    REQUIRE(
        it::wait_for([&] { return !it::lines_with(host.log(), slowone).empty(); }, Millis{5000}));
    auto lines = it::lines_with(host.log(), slowone);
    REQUIRE(lines.size() == 1);
    CHECK(lines[0].find("[warn]") != std::string::npos);
    for (const std::string& line : it::lines_with(host.log(), "slow request in flight"))
      CHECK(line.find("GET /echo?delay_ms=300&tag=slowone") != std::string::npos);
    // One worker: both requests were done (logged, counted) before it takes the status request.
    // A request's line is written just after its response, so the lines are counted after the
    // page, not before it (a slow "fast" request's line may follow its response by a moment).
    std::string json = host.connect().request("GET", "/status?json").body;
    const long counted = json_number(json, "slow requests");
    CHECK(counted >= 1);
    CHECK(it::wait_for(
        [&] {
          return static_cast<long>(it::lines_with(host.log(), "slow request: ").size()) >= counted;
        },
        Millis{5000}));
    CHECK(static_cast<long>(it::lines_with(host.log(), "slow request: ").size()) == counted);
  }

  TEST_CASE("ping answers pong, from a worker and from the master") {
    HostProcess host({"--app", "echo", "--workers", "1", "--ping-path", "/ping", "--status-listen",
                      "unix:{dir}/status.sock"});
    fcgi_test::Response r = host.connect().request("GET", "/ping");
    CHECK(r.status == 200);
    CHECK(r.body == "pong\n");
    CHECK(get(status_socket(host), "/ping").body == "pong\n");
    Command ping = run_binary("ping --connect " + host.address());
    CHECK(ping.status == 0);
    CHECK(ping.output == "pong\n");
    CHECK(run_binary("ping --connect " + status_socket(host)).status == 0);
  }

  TEST_CASE("--status-allow refuses a TCP peer not in the list, Unix peers pass") {
    int port = it::free_tcp_port();
    HostProcess host({"--app", "echo", "--workers", "1", "--status-path", "/status",
                      "--status-listen", "127.0.0.1:" + std::to_string(port), "--status-allow",
                      "10.1.2.0/24"});
    std::string tcp = "127.0.0.1:" + std::to_string(port);
    REQUIRE(it::wait_for(
        [&] {
          try {
            ::close(fcgi_test::connect_socket(tcp, Millis{200}));
            return true;
          } catch (const fcgi_test::Error&) {
            return false;
          }
        },
        Millis{3000}));
    CHECK(get(tcp, "/status").status == 403);
    CHECK(run_binary("status --connect " + tcp).status == 1);
    // On a worker the HTTP client's REMOTE_ADDR is what is checked.
    auto c = host.connect();
    CHECK(c.request("GET", "/status", "", {{"REMOTE_ADDR", "192.0.2.7"}}).status == 403);
    CHECK(c.request("GET", "/status", "", {{"REMOTE_ADDR", "10.1.2.9"}}).status == 200);
  }

  TEST_CASE("fcgi-host status and ping exit codes") {
    HostProcess host({"--app", "hello", "--workers", "1", "--status-path", "/status"});
    Command ok = run_binary("status --connect " + host.address());
    CHECK(ok.status == 0);
    CHECK(ok.output.find("idle processes:       1") != std::string::npos);
    Command om = run_binary("status --connect " + host.address() + " --openmetrics");
    CHECK(om.status == 0);
    CHECK(it::ends_with(om.output, "# EOF\n"));
    // The hello app answers 200 "OK" on every path, so a wrong --path still answers: not a page
    // that fails. A host that does not answer at all:
    CHECK(run_binary("ping --connect unix:" + host.dir().file("nothing.sock") + " --timeout 1")
              .status == 3);
    CHECK(run_binary("status").status == 2);
    CHECK(run_binary("status --connect " + host.address() + " --bogus").status == 2);
  }

  TEST_CASE("status and ping: an answer that is not the host's own page fails the check") {
    // Without --ping-path the handler answers /ping: not fcgi-host's answer, so no health.
    HostProcess host({"--app", "echo", "--workers", "1", "--ping-path", "/ping"});
    Command handler = run_binary("ping --connect " + host.address() + " --path /fine");
    CHECK(handler.status == 3);
    CHECK(handler.output.find("no ping page at /fine (set --ping-path on the host, or --path "
                              "here)") != std::string::npos);
    Command status = run_binary("status --connect " + host.address());
    CHECK(status.status == 3);
    CHECK(status.output.find("no status page at /status (set --status-path") != std::string::npos);
    CHECK(run_binary("ping --connect " + host.address()).status == 0);
    Command help = run_binary("ping --help");
    CHECK(help.status == 0);
    CHECK(help.output.find("--timeout") != std::string::npos);
  }

  TEST_CASE("the access log: one line per request in the given format, USR1 reopens it") {
    // On USR1 the master reopens the log and hands it to the workers (which, as nobody, could
    // not open it in the test's private directory themselves).
    HostProcess host({"--app", "echo", "--workers", "2", "--access-log", "{dir}/access.log",
                      "--access-format", "%m %u %s %b %p %w %g"});
    for (int i = 0; i < 5; ++i)
      CHECK(host.connect().request("GET", "/x?n=" + std::to_string(i)).status == 200);
    std::string path = host.dir().file("access.log");
    REQUIRE(it::wait_for([&] { return it::lines_with(it::read_file(path), "GET /x").size() == 5; },
                         Millis{2000}));
    std::regex line_re(R"(GET /x\?n=[0-9] 200 [0-9]+ [0-9]+ [01] 1)");
    for (const std::string& line : it::lines_with(it::read_file(path), "GET /x"))
      CHECK(std::regex_search(line, line_re));
    REQUIRE(::rename(path.c_str(), (path + ".1").c_str()) == 0);
    host.signal(SIGUSR1);
    REQUIRE(host.wait_log("USR1: logs reopened"));
    // Each worker swaps the file in on its own USR1: done when none holds the renamed one.
    REQUIRE(it::wait_for(
        [&] {
          auto workers = host.worker_pids();
          return std::none_of(workers.begin(), workers.end(),
                              [&](pid_t w) { return it::holds_open(w, path + ".1"); });
        },
        Millis{5000}));
    for (int i = 0; i < 4; ++i)
      CHECK(host.connect().request("GET", "/after").status == 200);
    REQUIRE(
        it::wait_for([&] { return it::lines_with(it::read_file(path), "GET /after").size() == 4; },
                     Millis{2000}));
    CHECK(it::lines_with(it::read_file(path + ".1"), "GET /after").empty());
    CHECK(it::lines_with(it::read_file(path + ".1"), "GET /x").size() == 5);
  }

  TEST_CASE("memory: each worker's PSS and the pool's total, master included, from the master's "
            "socket, and what a worker's page can read") {
    const int W = 2;
    HostProcess host({"--app", "echo", "--workers", std::to_string(W), "--status-path", "/status",
                      "--status-listen", "unix:{dir}/status.sock"});
    REQUIRE(host.wait_workers(W).size() == W);
    std::string json = get(status_socket(host), "/status?json&full").body;
    INFO(json);
    std::vector<long> pss = pss_figures(json);
    REQUIRE(pss.size() == W + 1);
    long workers = 0;
    for (std::size_t i = 1; i < pss.size(); ++i) {
      CHECK(pss[i] > 0);
      workers += pss[i];
    }
    CHECK(pss[0] > workers); // the master's share is in the total
    CHECK(json_number(json, "pss processes") == W + 1);
    CHECK(json_number(json, "rss bytes") >= pss[1]);

    // A worker's page: started by root, the workers run as nobody and may read only their own
    // figures (no total without the master's); as another user, everything.
    std::string page = host.connect().request("GET", "/status?json&full").body;
    INFO(page);
    std::vector<long> seen = pss_figures(page);
    if (::geteuid() == 0) {
      CHECK(json_number(page, "pss processes") == -1);
      REQUIRE(seen.size() == 1);
      CHECK(seen[0] > 0);
    } else {
      CHECK(json_number(page, "pss processes") == W + 1);
      CHECK(seen.size() == W + 1);
    }

    fcgi_test::Response metrics = get(status_socket(host), "/?openmetrics");
    CHECK(metrics.body.find("\nfcgihost_pss_bytes ") != std::string::npos);
    CHECK(it::lines_with(metrics.body, "fcgihost_worker_pss_bytes{slot=").size() == W);
    CHECK(it::lines_with(metrics.body, "fcgihost_worker_rss_bytes{slot=").size() == W);
    std::string parsed = parse_openmetrics(host.dir(), metrics.body, "fcgihost_pss_processes");
    INFO(parsed);
    CHECK(parsed.find("VALUE " + std::to_string(W + 1) + "\n") != std::string::npos);
    CHECK(parsed.find("EXIT") == std::string::npos);
  }

  TEST_CASE("status formats: text, html, full") {
    HostProcess host({"--app", "echo", "--workers", "1", "--status-path", "/status"});
    auto c = host.connect();
    fcgi_test::Response text = c.request("GET", "/status");
    CHECK(text.body.find("active processes:     0") != std::string::npos);
    CHECK(text.body.find("listen queue:         0") != std::string::npos);
    fcgi_test::Response html = c.request("GET", "/status?html");
    CHECK(html.header("Content-Type").value_or("").starts_with("text/html"));
    CHECK(html.body.find("http-equiv=\"refresh\"") != std::string::npos);
    fcgi_test::Response full = c.request("GET", "/status?full");
    // The only worker waits with this client's kept connection open: free, and says why.
    CHECK(full.body.find("state:                keepalive-idle") != std::string::npos);
    CHECK(text.body.find("idle processes:       1") != std::string::npos);
  }
}
