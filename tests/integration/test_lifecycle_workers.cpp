// Lifecycle of workers against the real binary: request timeout (stack trace, 5xx, fast
// replacement), recycling by request count and RSS, crash containment and boot failure, spawn
// mode (--exec) with a plain libfcgi program and php-cgi, and the ondemand pool.
#include "checks.hpp"
#include "lifecycle_load.hpp"
#include "request_modes.hpp"
#include "support/skip.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <future>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

using namespace std::chrono_literals;
using fcgi_test::Millis;
using it::HostProcess;
using Clock = std::chrono::steady_clock;

namespace {

std::string body_field(const std::string& body, const std::string& name) {
  auto at = body.find(name + "=");
  if (at == std::string::npos) return {};
  auto end = body.find('\n', at);
  return body.substr(at + name.size() + 1, end - at - name.size() - 1);
}

// Sends the crashing request `uri` from four threads, each on its own connection, until the
// breaker's line is logged (true), `most` requests were sent or `within` passed (false). The
// breaker counts young deaths (within 1 s of a worker's ready), so a crash must meet each new
// worker at once whatever the machine's load: the senders keep one waiting in the listening
// socket's backlog. One at a time, a loaded machine's round trip (the crash, its report, the
// respawn) can outlast that second and the breaker never trips. `sent`: the requests sent.
bool crash_until_breaker(const HostProcess& host, const std::string& uri, int most, Millis within,
                         int& sent) {
  std::atomic<int> count{0};
  std::atomic<bool> stop{false};
  const auto deadline = Clock::now() + within;
  std::vector<std::future<void>> senders;
  for (int i = 0; i < 4; ++i) {
    senders.push_back(std::async(std::launch::async, [&] {
      while (!stop && count.fetch_add(1) < most && Clock::now() < deadline) {
        try {
          auto c = host.connect(Millis{5000});
          c.set_timeout(Millis{5000});
          c.request("GET", uri);
        } catch (const std::exception&) {}
      }
    }));
  }
  const bool tripped =
      it::wait_for([&] { return !it::lines_with(host.log(), "crash loop").empty(); }, within);
  stop = true;
  for (auto& f : senders)
    f.get();
  sent = std::min(count.load(), most);
  return tripped;
}

} // namespace

TEST_SUITE("lifecycle") {

  TEST_CASE("hung handler killed and replaced: stack trace logged, nginx 5xx, fresh worker") {
    for (const std::string mold :
         {"off", "on"}) { // --mold on: the stack of a worker the mold forked
      CAPTURE(mold);
      HostProcess host(
          {"--app", "echo", "--workers", "1", "--request-timeout", "1", "--mold", mold});
      it::NginxProcess nginx({host.address()});
      auto t0 = Clock::now();
      int status =
          it::http_request(nginx.port(), "GET", "/echo?delay_ms=10000", {}, Millis{15000}).status;
      double killed_after = test_support::elapsed_ms(t0);
      auto t1 = Clock::now();
      int next = it::http_request(nginx.port(), "GET", "/echo?after=1").status;
      double fresh_after = test_support::elapsed_ms(t1);
      MESSAGE("request timeout 1 s: 5xx after "
              << killed_after << " ms (includes the stack trace); "
              << "next request served in " << fresh_after << " ms");
      CHECK(status >= 500);
      CHECK(status <= 599);
      // The timeout, the master's tick, the debugger's budget, and a second's margin for a loaded
      // machine (ctest -j2, scripts/stress.sh): what this guards against is the 10 s request.
      CHECK(killed_after < 1000 + 200 + 1500 + 1000);
      CHECK(next == 200);
      // The replacement is forked at once (a timeout kill is not a crash: no backoff); through
      // nginx, under load, well within a second.
      CHECK(fresh_after < 1000);
      std::string log = host.log();
      // The line names the request, its id, and how long it ran.
      auto lines = it::lines_with(log, ": request \"GET /echo?delay_ms=10000\", request id ");

      INFO("host log:\n" << log);
      REQUIRE(lines.size() == 1);
      CHECK(lines[0].find("worker ") != std::string::npos);
      CHECK(lines[0].find(" ran for ") != std::string::npos);
      CHECK(lines[0].find("past --request-timeout (1.0 s): the worker is killed; stack:") !=
            std::string::npos);
      CHECK(log.find("; stack:\nTID ") != std::string::npos); // the stuck thread named
    }
  }

  TEST_CASE("a kept connection idle between requests is never a running request") {
    it::HostOptions o;
    o.args = {"--app", "echo", "--workers", "1", "--request-timeout", "0.3"};
    o.status_socket = true;
    HostProcess host(o);
    auto c = host.connect();
    c.set_timeout(Millis{5000});
    fcgi_test::Request r;
    r.uri = "/echo?first=1";
    r.keep_conn = true;
    CHECK(c.request(r).status == 200);
    test_wait::hold_for(600ms);     // the scenario: idle for twice the request timeout
    CHECK(host.wait_master_turn()); // and the master has looked at the worker since
    r.uri = "/echo?second=1";
    CHECK(c.request(r).status == 200);
    CHECK(it::lines_with(host.log(), "past --request-timeout").empty());
  }

  REQUEST_PATH_CASE("recycling by --max-requests with jitter under keep-alive load: 0 failures") {
    for (const std::string mold : {"off", "on"}) { // --mold on: every worker forked by the mold
      CAPTURE(mold);
      HostProcess host(it::with_threads({"--app", "echo", "--workers", "2", "--max-requests", "40",
                                         "--max-requests-jitter", "20", "--mold", mold}));
      it::NginxOptions no{host.address()};
      no.upstream_keepalive = 8;
      it::NginxProcess nginx(no);
      // Stopped as soon as 4 recyclings are seen; a recycling worker still serves its kept
      // connections for a few seconds, so the cap is generous.
      it::HttpLoad load(nginx.port(), "/echo?load=1", 3, 20000);
      it::wait_for([&] { return it::lines_with(host.log(), "worker recycling").size() >= 4; },
                   Millis{20000});
      load.stop();
      std::size_t recycled = it::lines_with(host.log(), "worker recycling").size();
      MESSAGE("max-requests 40+0..20: " << load.samples().size() << " requests, " << load.failures()
                                        << " failures, " << recycled << " recyclings");
      INFO("first error: " << load.first_error() << "\nnginx: " << nginx.error_log());
      CHECK(recycled >= 4);
      CHECK(load.failures() == 0);
      CHECK(it::lines_with(host.log(), "crash").empty());
      it::check_no_alerts(host);
    }
  }

  TEST_CASE("recycling by --max-rss: the worker goes after the request that crossed it") {
    HostProcess host({"--app", "echo", "--workers", "1", "--max-rss", "1"});
    std::set<pid_t> workers;
    auto first = host.wait_workers(1);
    REQUIRE(first.size() == 1);
    pid_t current = first[0];
    for (int i = 0; i < 4; ++i) {
      auto c = host.connect();
      CHECK(c.request("GET", "/echo").status == 200);
      workers.insert(current);
      // Every request crosses 1 MiB: its worker goes after it, and a new one takes its place.
      auto next = host.wait_worker_replaced(current, 1, Millis{3000});
      if (!next.empty()) current = next[0];
    }
    CHECK(it::lines_with(host.log(), "peak RSS above --max-rss").size() >= 3);
    CHECK(workers.size() >= 3);
  }

  TEST_CASE("a worker killed mid-request costs only that request") {
    for (const std::string mold : {"off", "on"}) { // --mold on: every worker forked by the mold
      CAPTURE(mold);
      it::HostOptions o;
      o.args = {"--app", "echo", "--workers", "1", "--mold", mold};
      o.status_socket = true;
      HostProcess host(o);
      auto victim = host.connect();
      victim.set_timeout(Millis{5000});
      fcgi_test::Request slow;
      slow.uri = "/echo?delay_ms=3000";
      std::uint16_t id = victim.send_request(slow);
      REQUIRE(host.wait_active(1));
      std::vector<fcgi_test::Client> others;
      std::vector<std::uint16_t> ids;
      for (int i = 0; i < 5; ++i) {
        others.push_back(host.connect());
        others.back().set_timeout(Millis{5000});
        fcgi_test::Request r;
        r.uri = "/echo?n=" + std::to_string(i);
        ids.push_back(others.back().send_request(r));
      }
      auto w = host.wait_workers(1);
      REQUIRE(w.size() == 1);
      ::kill(w[0], SIGKILL);
      fcgi_test::Response lost;
      try {
        lost = victim.read_response(id);
      } catch (const std::exception&) {}
      CHECK(!lost.ended);
      int ok = 0;
      for (std::size_t i = 0; i < others.size(); ++i)
        ok += others[i].read_response(ids[i]).status == 200;
      CHECK(ok == 5);
    }
  }

  TEST_CASE("/crash repeatedly: respawned with backoff, the breaker logs once, master lives") {
    for (const std::string mold : {"off", "on"}) { // --mold on: every worker forked by the mold
      CAPTURE(mold);
      HostProcess host({"--app", "echo", "--workers", "12", "--mold", mold});
      REQUIRE(host.wait_workers(12).size() == 12);
      // Bounded: 80 requests, 20 s.
      const auto start = Clock::now();
      int sent = 0;
      crash_until_breaker(host, "/crash", 80, Millis{20000}, sent);
      std::string log = host.log();
      INFO("crash requests sent: " << sent << "\nhost log:\n" << log);
      CHECK(it::lines_with(log, "crash loop").size() == 1);
      // Rate-limited crash lines: the first three of the burst, then one a second.
      const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
      CHECK(static_cast<double>(it::lines_with(log, "killed by signal").size()) <= 3 + elapsed + 1);
      CHECK(!host.wait_exit(Millis{0}));
      host.signal(SIGTERM);
      std::optional<int> code = host.wait_exit(Millis{20000});
      INFO("host log after TERM:\n" << host.log());
      CHECK(code.value_or(-1) == 0);
    }
  }

  TEST_CASE("a handler that boots for 1.5 s and crashes on every request trips the breaker") {
    // A crash's age counts from ready, not from the fork: each of these workers lived over
    // 1.5 s, yet each crash loop turn is young, meets the backoff, and the breaker trips.
    it::HostOptions o;
    o.args = {"--app", FCGI_TEST_CRASH_PLUGIN,     "--workers", "4",
              "--env", "CRASH_PLUGIN_BOOT_MS=1500"};
    o.allow_log = {"killed by signal 6", "crash loop",
                   R"(more crash(es)? suppressed \(crash lines are rate-limited)"};
    HostProcess host(o);
    REQUIRE(host.wait_workers(4).size() == 4);
    int sent = 0;
    const bool tripped = crash_until_breaker(host, "/crash/abort", 80, Millis{40000}, sent);
    INFO("crash requests sent: " << sent << "\nhost log:\n" << host.log());
    CHECK(tripped);
    CHECK(it::lines_with(host.log(), "crash loop").size() == 1);
  }

  TEST_CASE("a worker that fails to boot stops the master: one clear line, exit 1") {
    it::HostOptions o;
    o.args = {"--app", FCGI_TEST_BOOT_FAILURE_PLUGIN, "--workers", "3"};
    o.expect_log = {R"(\[error\] .*worker [0-9]+ failed to boot: database unreachable \(test\))"};
    it::RunResult r = it::run_host(o, Millis{10000});
    INFO("output:\n" << r.output);
    CHECK(r.status == 1);
    // One line about it, whatever the number of workers: what failed, why, and the exit.
    std::vector<std::string> lines = it::lines_with(r.output, "");
    std::erase_if(lines, [](const std::string& l) {
      return l.empty() || l.find("inherited from the starting process") != std::string::npos ||
             (l.find("[notice] ") != std::string::npos &&
              l.find(": sandbox ") != std::string::npos);
    });
    CHECK(it::lines_with(r.output, "failed to boot: database unreachable (test) (exit code 3); "
                                   "stopping, the master exits with code 1")
              .size() == 1);
    CHECK(it::lines_with(r.output, "database unreachable").size() == 1);
    CHECK(it::lines_with(r.output, "[alert]").empty());
    // Besides it, only the two start lines (listening, master started), and the lines about the
    // sandbox and the descriptors the test runner leaked, if it did.
    CHECK(lines.size() == 3);
  }

  TEST_CASE("a worker that dies before it is ready (abort, exit(1), --exec /bin/false) stops "
            "the master: one line, exit 1, no respawn loop") {
    struct Form {
      std::vector<std::string> args;
      std::string words;
    };
    const std::string plugin = FCGI_TEST_BOOT_FAILURE_PLUGIN;
    for (const Form& f : {Form{{"--app", plugin, "--env", "FCGI_TEST_BOOT_DEATH=abort"},
                               "died of SIGABRT before it was ready (boot failure)"},
                          // exit() runs the sanitizers' exit checks in a sanitized build: any code.
                          Form{{"--app", plugin, "--env", "FCGI_TEST_BOOT_DEATH=exit"},
                               " before it was ready (boot failure)"},
                          Form{{"--exec", "/bin/false"},
                               "exited with code 1 before it was ready (boot failure)"}}) {
      it::HostOptions o;
      o.args = {"--workers", "3"};
      o.args.insert(o.args.end(), f.args.begin(), f.args.end());
      o.allow_log = {"LeakSanitizer"}; // exit() in a sanitized build may report leaks
      o.expect_log = {R"(\[error\] .*worker [0-9]+ .*before it was ready \(boot failure\); )"
                      R"(stopping, the master exits with code 1)"};
      it::RunResult r = it::run_host(o, Millis{10000});
      INFO("output:\n" << r.output);
      CHECK(r.status == 1);
      CHECK(it::lines_with(r.output, f.words + "; stopping, the master exits with code 1").size() ==
            1);
      CHECK(it::lines_with(r.output, "respawn").empty());
      CHECK(it::lines_with(r.output, "crash").empty());
      CHECK(it::lines_with(r.output, "[alert]").empty());
    }
  }

  TEST_CASE("a worker killed while it boots stops the master: one line, exit 1") {
    it::HostOptions o;
    o.args = {"--app", FCGI_TEST_BOOT_FAILURE_PLUGIN, "--workers", "1",
              "--env", "FCGI_TEST_BOOT_DEATH=hold"};
    o.wait_ready = false;
    o.expect_log = {R"(worker [0-9]+ died of SIGKILL before it was ready \(boot failure\); )"
                    R"(stopping, the master exits with code 1)"};
    HostProcess host(o);
    std::vector<pid_t> booting = host.wait_workers(1);
    REQUIRE(booting.size() == 1);
    ::kill(booting[0], SIGKILL);
    CHECK(host.wait_exit(Millis{10000}).value_or(-1) == 1);
    CHECK(it::lines_with(host.log(), "before it was ready").size() == 1);
  }

  TEST_CASE("a new generation whose worker dies before it is ready (abort, exit(1), SIGKILL "
            "while booting) is abandoned at HUP: the old one keeps serving") {
    struct Form {
      const char* form;
      const char* words; // of the one line (a regex)
    };
    for (const Form& f : {Form{"abort", "died of SIGABRT"}, Form{"exit", "exited with code [0-9]+"},
                          Form{"hold", "died of SIGKILL"}}) {
      const std::string form = f.form; // CAPTURE of a const char* would print the pointer
      CAPTURE(form);
      it::HostOptions o;
      o.files = {{"host.conf", "env = FCGI_TEST_BOOT_DEATH=none\n"}};
      o.args = {"--app",          FCGI_TEST_BOOT_FAILURE_PLUGIN, "--workers", "2", "--config",
                "{dir}/host.conf"};
      o.allow_log = {"LeakSanitizer"}; // exit() in a sanitized build may report leaks
      const std::string line = std::string(f.words) +
                               " before it was ready \\(boot failure\\); abandoning generation "
                               "2, keeping generation 1";
      o.expect_log = {line};
      HostProcess host(o);
      REQUIRE(host.wait_workers(2).size() == 2);
      std::vector<pid_t> before = host.worker_pids();
      host.dir().write("host.conf", "env = FCGI_TEST_BOOT_DEATH=" + form + "\n");
      host.signal(SIGHUP);
      if (form == "hold") { // kill one of the new generation while it boots
        // The master's first new child at HUP is the one that checks the plugin (it runs and is
        // reaped before the workers are forked); a new generation's workers are the two new
        // children seen together, both held in their boot.
        std::vector<pid_t> booting;
        CHECK(it::wait_for(
            [&] {
              booting.clear();
              for (pid_t p : host.worker_pids())
                if (std::find(before.begin(), before.end(), p) == before.end())
                  booting.push_back(p);
              return booting.size() == 2;
            },
            Millis{5000}));
        if (booting.size() == 2) ::kill(booting[0], SIGKILL);
      }
      CHECK(host.wait_log(line, Millis{10000}));
      CHECK(host.connect().request("GET", "/after").status == 200);
      CHECK(it::wait_for([&] { return host.worker_pids() == before; }, Millis{5000}));
      CHECK(it::lines_with(host.log(), "abandoning generation").size() == 1);
      host.signal(SIGTERM);
      CHECK(host.wait_exit(Millis{10000}).value_or(-1) == 0);
    }
  }

  TEST_CASE("--exec runs a libfcgi program: served, respawned, reloaded, stopped") {
    it::HostOptions o;
    o.args = {"--workers",          "2", "--env",  "FIXTURE_WHO=exec-test",
              "--graceful-timeout", "5", "--exec", it::workers_fixture(FCGI_TEST_LIBFCGI_ECHO)};
    o.status_socket = true;
    HostProcess host(o);
    INFO("host log:\n" << host.log()); // read when a check fails
    auto pids = host.wait_workers(2);
    REQUIRE(pids.size() == 2);
    std::set<std::string> served_by;
    for (int i = 0; i < 6; ++i) {
      auto r = host.connect().request("GET", "/x?i=" + std::to_string(i));
      CHECK(r.status == 200);
      CHECK(body_field(r.body, "who") == "exec-test");
      served_by.insert(body_field(r.body, "pid"));
    }
    CHECK(served_by.size() >= 1);
    // Respawned when killed once ready (alive for the boot window: worker_exit.hpp); a death
    // before would be a boot failure.
    CHECK(!host.wait_status("idle processes", 2).empty());
    // Respawned when killed.
    ::kill(pids[0], SIGKILL);
    CHECK(host.wait_worker_replaced(pids[0], 2, Millis{3000}).size() == 2);
    // Reloaded: a request in flight at the HUP completes (libfcgi exits after it on TERM).
    // In flight means read by the program: the listen queue (wait_accepted) empties at the
    // kernel's accept(), before libfcgi has read the request, and a TERM in that window makes
    // its read() fail with EINTR, so it closes the connection unanswered. Only the program can
    // say it has the request: the fixture's line in the log.
    auto slow = host.connect();
    slow.set_timeout(Millis{5000});
    fcgi_test::Request sr;
    sr.uri = "/x?delay_ms=1000";
    std::uint16_t id = slow.send_request(sr);
    REQUIRE(host.wait_log("in the handler for delay_ms=1000"));
    auto before = host.worker_pids();
    host.signal(SIGHUP);
    CHECK(slow.read_response(id).status == 200);
    CHECK(it::wait_for(
        [&] {
          auto now = host.worker_pids();
          if (now.size() != 2) return false;
          for (pid_t p : now)
            if (std::find(before.begin(), before.end(), p) != before.end()) return false;
          return true;
        },
        Millis{5000}));
    CHECK(host.connect().request("GET", "/x?after=1").status == 200);
    host.signal(SIGTERM);
    CHECK(host.wait_exit(Millis{10000}).value_or(-1) == 0);
    CHECK(it::lines_with(host.log(), "crash").empty());
  }

  TEST_CASE("--exec php-cgi (skipped when php-cgi is not installed)") {
    if (::access("/usr/bin/php-cgi", X_OK) != 0)
      return test_support::skip("php-cgi is not installed (apt-get install php8.2-cgi)");
    HostProcess host({"--workers", "2", "--exec", "/usr/bin/php-cgi"});
    // php-cgi reads the script: started as root, it runs as nobody, which must be able to.
    REQUIRE(::chmod(host.dir().path().c_str(), 0755) == 0);
    std::string script = host.dir().write("hello.php", "<?php echo 'php ok ', getmypid();");
    fcgi_test::Params p{{"SCRIPT_FILENAME", script}};
    auto r = host.connect().request("GET", "/hello.php", {}, p);
    CHECK(r.status == 200);
    CHECK(r.body.starts_with("php ok "));
    host.signal(SIGHUP);
    CHECK(host.wait_log("ready; retiring"));
    CHECK(host.connect().request("GET", "/hello.php", {}, p).body.starts_with("php ok "));
    host.signal(SIGTERM);
    CHECK(host.wait_exit(Millis{10000}).value_or(-1) == 0);
  }

  TEST_CASE("--pm ondemand: no worker at start, one for a request, none after idle-timeout") {
    for (const std::string mold : {"off", "on"}) { // --mold on: a fork of the mold per request wave
      CAPTURE(mold);
      it::HostOptions o;
      o.args = {"--app", "echo",           "--pm", "ondemand", "--max-workers",
                "2",     "--idle-timeout", "1",    "--mold",   mold};
      o.status_socket = true;
      HostProcess host(o);
      // The harness's readiness probe was a connection: it got a worker, which goes after the
      // idle timeout.
      CHECK(host.wait_workers(1, Millis{2000}).size() == 1);
      CHECK(it::wait_for([&] { return host.worker_pids().empty(); }, Millis{3000}));
      CHECK(host.wait_master_turn()); // it has looked again: nothing to start
      CHECK(host.worker_pids().empty());
      auto t0 = Clock::now();
      CHECK(host.connect().request("GET", "/echo?x=1").status == 200);
      MESSAGE("ondemand: first request with a spawn served in " << test_support::elapsed_ms(t0)
                                                                << " ms");
      CHECK(host.worker_pids().size() == 1);
      CHECK(it::wait_for([&] { return host.worker_pids().empty(); }, Millis{3000}));
      host.signal(SIGTERM);
      CHECK(host.wait_exit(Millis{10000}).value_or(-1) == 0);
    }
  }

} // TEST_SUITE
