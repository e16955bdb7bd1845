// Lifecycle under load, through a real nginx: 20 HUP reloads and a USR2 binary upgrade must cost
// no request; TERM with connections queued in the listen backlog answers every one of them.
#include "checks.hpp"
#include "commands.hpp"
#include "lifecycle_load.hpp"
#include "request_modes.hpp"

#include <csignal>
#include <future>
#include <sys/stat.h>

using namespace std::chrono_literals;
using fcgi_test::Millis;
using it::HostOptions;
using it::HostProcess;
using Clock = std::chrono::steady_clock;

namespace {

// `n` reloads one after the other: each HUP is sent once the previous reload has retired the
// generation before it (a HUP during a reload would only be queued, and HUPs coalesce).
void reload_times(HostProcess& host, int n) {
  for (int i = 0; i < n; ++i) {
    std::size_t done = it::lines_with(host.log(), "ready; retiring").size();
    host.signal(SIGHUP);
    REQUIRE(host.wait_log("ready; retiring", Millis{10000}, done + 1));
  }
}

} // namespace

TEST_SUITE("lifecycle") {

  TEST_CASE("20 reloads under load, 0 failures, a 3 s request in flight at a reload gets 200") {
    HostOptions o;
    o.args = {"--app", "echo", "--workers", "2", "--graceful-timeout", "20"};
    o.status_socket = true;
    HostProcess host(o);
    it::NginxProcess nginx({host.address()});
    int port = nginx.port();
    auto load_from = Clock::now();
    it::HttpLoad load(port, "/echo?load=1", 3);

    REQUIRE(load.wait_more(150)); // the baseline: no reload
    auto reload_from = Clock::now();
    auto slow = std::async(std::launch::async, [port] {
      return it::http_request(port, "GET", "/echo?delay_ms=3000", {}, Millis{15000}).status;
    });
    REQUIRE(host.wait_serving("/echo?delay_ms=3000")); // a worker of generation 1 holds it
    reload_times(host, 20);
    auto reload_to = Clock::now();
    CHECK(load.wait_more(50)); // and after the last one
    CHECK(load.wait_completed(250));
    load.stop();

    CHECK(slow.get() == 200);
    std::size_t total = load.samples().size();
    double p99_base = load.p99(load_from, reload_from);
    double p99_reload = load.p99(reload_from, reload_to);
    MESSAGE("20 reloads: " << total << " requests, " << load.failures() << " failures; p99 "
                           << p99_base << " ms without reloads ("
                           << load.count(load_from, reload_from) << " requests), " << p99_reload
                           << " ms during reloads (" << load.count(reload_from, reload_to)
                           << " requests)");
    INFO("first error: " << load.first_error() << "\nnginx: " << nginx.error_log());
    CHECK(total > 200);
    CHECK(load.failures() == 0);
    std::string log = host.log();
    CHECK(it::lines_with(log, "ready; retiring").size() == 20);
    CHECK(it::lines_with(log, "abandoning").empty());
    host.signal(SIGTERM);
    CHECK(host.wait_exit(Millis{10000}).value_or(-1) == 0);
    it::check_no_alerts(host);
  }

  REQUEST_PATH_CASE("20 reloads under POST load through nginx keep-alive: 0 failures") {
    for (const std::string mold : {"off", "on"}) { // --mold on: every worker forked by the mold
      CAPTURE(mold);
      // The old generation's kept connections must not be closed under a request nginx is
      // writing: a POST lost that way is not retried by nginx.
      HostProcess host(it::with_threads({"--app", "echo", "--workers", "2", "--mold", mold}));
      it::NginxOptions options{host.address()};
      options.upstream_keepalive = 8;
      it::NginxProcess nginx(options);
      it::HttpLoad load(nginx.port(), "/echo?load=1", 4, 200'000, "payload=1");
      REQUIRE(load.wait_more(50));
      reload_times(host, 20);
      CHECK(load.wait_more(50)); // and after the last one
      CHECK(load.wait_completed(250));
      load.stop();
      MESSAGE("20 reloads, POST, keep-alive: " << load.samples().size() << " requests, "
                                               << load.failures() << " failures");
      INFO("first error: " << load.first_error() << "\nnginx: " << nginx.error_log());
      CHECK(load.samples().size() > 200);
      CHECK(load.failures() == 0);
      CHECK(it::lines_with(host.log(), "reload refused").empty());
      it::check_no_alerts(host);
    }
  }

  TEST_CASE("USR2 under load: the new master takes the socket and the pidfile, 0 failures") {
    for (const std::string mold : {"off", "on"}) { // --mold on: every worker forked by the mold
      CAPTURE(mold);
      HostProcess host(
          {"--app", "echo", "--workers", "2", "--pidfile", "{dir}/host.pid", "--mold", mold});
      std::string pidfile = host.dir().file("host.pid");
      std::string sock = host.dir().file("host.sock");
      // Written just after the socket is bound: the socket may accept first.
      REQUIRE(it::wait_for([&] { return it::read_pid(pidfile) == host.pid(); }, Millis{5000}));
      it::NginxProcess nginx({host.address()});
      it::HttpLoad load(nginx.port(), "/echo?load=1", 3);
      REQUIRE(load.wait_more(50));

      host.signal(SIGUSR2);
      // The old master exits 0 once the new one is ready and its own workers are done.
      CHECK(host.wait_exit(Millis{10000}).value_or(-1) == 0);
      pid_t new_master = it::read_pid(pidfile);
      CHECK(new_master != host.pid());
      CHECK(it::process_alive(new_master));
      CHECK(load.wait_more(50)); // served by the new master alone
      load.stop();
      MESSAGE("USR2: " << load.samples().size() << " requests, " << load.failures()
                       << " failures; new master " << new_master);
      INFO("first error: " << load.first_error() << "\nhost log:\n" << host.log());
      CHECK(load.failures() == 0);
      struct stat st {};
      CHECK(::stat(sock.c_str(), &st) == 0); // the old master left the socket file alone
      CHECK(it::http_request(nginx.port(), "GET", "/echo?after=1").status == 200);

      // The new master stops like any other: it removes the socket file and the pidfile.
      if (new_master > 0 && it::process_alive(new_master)) ::kill(new_master, SIGTERM);
      CHECK(test_wait::wait_process_exit(new_master, Millis{10000}));
      CHECK(::stat(sock.c_str(), &st) != 0);
      CHECK(it::read_file(pidfile).empty());
      CHECK(it::lines_with(host.log(), "binary upgrade: new master").size() >= 2);
    }
  }

  TEST_CASE("USR2 keeps --status-listen: status, ping and reload answer through it afterwards") {
    HostProcess host({"--app", "echo", "--workers", "1", "--pidfile", "{dir}/host.pid",
                      "--status-listen", "unix:{dir}/control.sock"});
    const std::string pidfile = host.dir().file("host.pid");
    const std::string control = "unix:" + host.dir().file("control.sock");
    REQUIRE(it::wait_for([&] { return it::read_pid(pidfile) == host.pid(); }, Millis{5000}));
    REQUIRE(it::run_binary("ping --connect " + control).status == 0);
    host.signal(SIGUSR2);
    // The old master exits 0 once the new one is ready: the status socket was handed over with
    // the listening one, so its path is the new master's, not removed by the old one.
    CHECK(host.wait_exit(Millis{10000}).value_or(-1) == 0);
    const pid_t new_master = it::read_pid(pidfile);
    REQUIRE(new_master != host.pid());
    INFO(host.log());
    const it::Command ping = it::run_binary("ping --connect " + control);
    CHECK(ping.status == 0);
    const it::Command status = it::run_binary("status --connect " + control + " --json");
    CHECK(status.status == 0);
    CHECK(status.output.find("\"idle processes\"") != std::string::npos);
    const it::Command reload = it::run_binary("reload --connect " + control);
    CHECK(reload.status == 0);
    CHECK(host.wait_log("starting generation 2", Millis{10000}));
    CHECK(it::lines_with(host.log(), "serving without it").empty());
    // The new master stops like any other: the status socket's path goes with it.
    if (new_master > 0 && it::process_alive(new_master)) ::kill(new_master, SIGTERM);
    CHECK(test_wait::wait_process_exit(new_master, Millis{10000}));
    struct stat st {};
    CHECK(::stat(host.dir().file("control.sock").c_str(), &st) != 0);
  }

  TEST_CASE("TERM drains the backlog: 50 queued connections all answered, then exit 0") {
    for (const std::string mold : {"off", "on"}) { // --mold on: every worker forked by the mold
      CAPTURE(mold);
      HostOptions o;
      o.args = {"--app", "echo", "--workers", "1", "--graceful-timeout", "20", "--mold", mold};
      o.status_socket = true;
      HostProcess host(o);
      auto holder = host.connect();
      holder.set_timeout(Millis{10000});
      fcgi_test::Request slow;
      slow.uri = "/echo?delay_ms=1500";
      std::uint16_t slow_id = holder.send_request(slow);
      REQUIRE(host.wait_active(1)); // the only worker is inside the slow handler

      std::vector<fcgi_test::Client> queued;
      std::vector<std::uint16_t> ids;
      for (int i = 0; i < 50; ++i) {
        queued.push_back(host.connect());
        queued.back().set_timeout(Millis{15000});
        fcgi_test::Request r;
        r.uri = "/echo?n=" + std::to_string(i);
        ids.push_back(queued.back().send_request(r));
      }
      host.signal(SIGTERM); // arrives while all 50 still wait in the listen backlog
      CHECK(holder.read_response(slow_id).status == 200);
      int answered = 0;
      for (std::size_t i = 0; i < queued.size(); ++i) {
        try {
          fcgi_test::Response r = queued[i].read_response(ids[i]);
          answered += r.ended && r.status == 200;
        } catch (const std::exception&) {}
      }
      MESSAGE("TERM with 50 queued connections: " << answered << " answered");
      CHECK(answered == 50);
      CHECK(host.wait_exit(Millis{10000}).value_or(-1) == 0);
      it::check_no_alerts(host);
    }
  }

} // TEST_SUITE
