// fcgi-host under signals and kills: graceful and fast stop, worker and master deaths, reload,
// log reopening, pool resizing.
#include "checks.hpp"

#include <csignal>
#include <cstdio>
#include <sys/stat.h>

using namespace std::chrono_literals;
using fcgi_test::Millis;
using it::HostOptions;
using it::HostProcess;
using it::Listen;
using Clock = std::chrono::steady_clock;

namespace {

// A request that takes 2 s is in flight when `sig` arrives: it must still get its 200, and the
// master must then exit 0 with no worker left.
void check_graceful_stop(int sig) {
  HostOptions o;
  o.args = {"--app", "echo", "--workers", "2", "--graceful-timeout", "10"};
  o.status_socket = true;
  HostProcess host(o);
  auto c = host.connect();
  c.set_timeout(Millis{10000});
  fcgi_test::Request slow;
  slow.uri = "/echo?delay_ms=2000";
  std::uint16_t id = c.send_request(slow);
  REQUIRE(host.wait_active(1)); // a worker has it
  host.signal(sig);
  fcgi_test::Response r = c.read_response(id);
  CHECK(r.ended);
  CHECK(r.status == 200);
  CHECK(r.body.find("query=delay_ms=2000\n") != std::string::npos);
  CHECK(host.wait_exit(Millis{10000}).value_or(-1) == 0);
  CHECK(it::wait_for([&] { return it::pids_in_group(host.pid()).empty(); }, Millis{2000}));
  it::check_no_alerts(host);
}

} // namespace

TEST_SUITE("host signals") {

  TEST_CASE("TERM stops gracefully: the in-flight request finishes, exit 0") {
    check_graceful_stop(SIGTERM);
  }

  TEST_CASE("QUIT stops gracefully too") {
    check_graceful_stop(SIGQUIT);
  }

  TEST_CASE("INT stops fast, without waiting for a slow request") {
    HostOptions o;
    o.args = {"--app", "echo", "--workers", "1", "--graceful-timeout", "30"};
    o.status_socket = true;
    HostProcess host(o);
    auto c = host.connect();
    fcgi_test::Request slow;
    slow.uri = "/echo?delay_ms=20000";
    c.send_request(slow);
    REQUIRE(host.wait_active(1));
    auto start = Clock::now();
    host.signal(SIGINT);
    CHECK(host.wait_exit(Millis{5000}).value_or(-1) == 0);
    CHECK(test_support::elapsed_ms(start) < 3000);
    CHECK(it::wait_for([&] { return it::pids_in_group(host.pid()).empty(); }, Millis{2000}));
  }

  TEST_CASE("a worker killed with -9 is replaced, and a new worker serves within 1 s") {
    HostProcess host({"--app", "hello", "--workers", "1"});
    auto before = host.wait_workers(1);
    REQUIRE(before.size() == 1);
    // Ready first: a worker killed while it boots is a boot failure, which stops the master.
    REQUIRE(host.connect().request("GET", "/").body == "OK");
    auto start = Clock::now();
    ::kill(before[0], SIGKILL);
    CHECK(host.wait_worker_replaced(before[0], 1, Millis{1000}).size() == 1);
    auto c = host.connect(Millis{1000});
    c.set_timeout(Millis{2000});
    CHECK(c.request("GET", "/").body == "OK");
    CHECK(test_support::elapsed_ms(start) < 1000);
    // The kill is logged as an error, not an alert: the teardown checks that.
  }

  TEST_CASE("a crashing handler (abort) costs its request only, the master respawns the worker") {
    HostProcess host({"--app", "echo", "--workers", "1"});
    auto before = host.wait_workers(1);
    REQUIRE(before.size() == 1);
    auto c = host.connect();
    fcgi_test::Response r = c.request("GET", "/crash");
    CHECK_FALSE(r.ended); // the worker died mid-request
    auto c2 = host.connect();
    c2.set_timeout(Millis{3000});
    CHECK(c2.request("GET", "/echo").status == 200);
    auto after = host.worker_pids();
    CHECK(after.size() == 1);
    CHECK(after != before);
  }

  TEST_CASE("kill -9 of the master: its workers are gone within 1 s, a new host starts at once") {
    auto first =
        std::make_unique<HostProcess>(std::vector<std::string>{"--app", "hello", "--workers", "2"});
    auto workers = first->wait_workers(2);
    REQUIRE(workers.size() == 2);
    first->signal(SIGKILL);
    REQUIRE(first->wait_exit(Millis{2000}).value_or(-1) == 128 + SIGKILL);
    bool workers_gone = it::wait_for(
        [&] {
          for (pid_t w : workers)
            if (it::process_alive(w)) return false;
          return it::pids_in_group(first->pid()).empty();
        },
        Millis{1000});
    CHECK(workers_gone);

    // Same socket path: the stale socket file must not stop the new host.
    auto start = Clock::now();
    HostProcess second(
        HostOptions{{"--app", "hello", "--listen", first->address()}, {}, Listen::AsGiven});
    CHECK(test_support::elapsed_ms(start) < 3000);
    fcgi_test::Response r = second.connect().request("GET", "/");
    INFO("new host's log:\n" << second.log());
    CHECK(r.ended);
    CHECK(r.body == "OK");
    it::check_no_alerts(second);
  }

  TEST_CASE("HUP reloads: new workers, same master, no request lost") {
    HostProcess host({"--app", "hello", "--workers", "2"});
    auto before = host.wait_workers(2);
    REQUIRE(before.size() == 2);
    host.signal(SIGHUP);
    bool renewed = it::wait_for(
        [&] {
          auto now = host.worker_pids();
          if (now.size() != 2) return false;
          for (pid_t p : now)
            if (p == before[0] || p == before[1]) return false;
          return true;
        },
        Millis{5000});
    CHECK(renewed);
    CHECK(host.wait_exit(Millis{0}).value_or(-1) == -1); // same master, still running
    CHECK(host.connect().request("GET", "/").body == "OK");
    it::check_no_alerts(host);
  }

  TEST_CASE("TTIN and TTOU add and remove one worker") {
    HostProcess host({"--app", "hello", "--workers", "2"});
    REQUIRE(host.wait_workers(2).size() == 2);
    host.signal(SIGTTIN);
    CHECK(host.wait_workers(3).size() == 3);
    host.signal(SIGTTOU);
    CHECK(host.wait_workers(2).size() == 2);
    CHECK(host.connect().request("GET", "/").body == "OK");
    it::check_no_alerts(host);
  }

  TEST_CASE("USR1 reopens the error log") {
    HostProcess host({"--app", "hello", "--workers", "1", "--error-log", "{dir}/error.log",
                      "--log-level", "info"});
    std::string log = host.dir().file("error.log");
    REQUIRE(it::wait_for([&] { return ::access(log.c_str(), F_OK) == 0; }, Millis{2000}));
    REQUIRE(std::rename(log.c_str(), (log + ".1").c_str()) == 0);
    host.signal(SIGUSR1);
    INFO("host log:\n" << host.log() << it::read_file(log + ".1") << it::read_file(log));
    CHECK(it::wait_for([&] { return ::access(log.c_str(), F_OK) == 0; }, Millis{2000}));
    CHECK(host.wait_exit(Millis{0}).value_or(-1) == -1); // still running (138 = killed by USR1)
    CHECK(host.connect().request("GET", "/").body == "OK");
    CHECK(it::lines_with(it::read_file(log + ".1") + it::read_file(log), "[alert]").empty());
  }

} // TEST_SUITE
