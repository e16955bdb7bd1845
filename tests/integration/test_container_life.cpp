// The host as a container runs it: PID 1 of a PID namespace that reaps every child (also the
// orphans of an --exec program) and exits 0 after TERM; and a readiness that follows the stop:
// once a graceful stop begins, the ping answers 503 (the workers' ping path, the master's
// --status-listen, `fcgi-host ping`) while the request in flight finishes.
#include "checks.hpp"
#include "commands.hpp"
#include "support/skip.hpp"

#include <csignal>
#include <unistd.h>

using fcgi_test::Millis;
using fcgi_test::RecordType;
using it::HostOptions;
using it::HostProcess;

namespace {

#ifndef FCGI_TEST_LIBFCGI_ECHO
#define FCGI_TEST_LIBFCGI_ECHO ""
#endif

// An --exec program that leaves an orphan before it serves: `sh -c 'true &'` exits at once, so
// its child `true` goes to the nearest subreaper, or to PID 1, which must reap it.
std::vector<std::string> orphan_making_program() {
  return {"--exec", "/bin/sh", "-c",
          "/bin/sh -c '/bin/true &'; exec " + it::workers_fixture(FCGI_TEST_LIBFCGI_ECHO)};
}

constexpr const char* kOrphanReaped = R"(reaped child \d+, not a worker \(an adopted orphan\): )"
                                      R"(exited with code 0)";

bool can_make_pid_namespace(std::string& why) {
  if (::geteuid() != 0) {
    why = "not root";
    return false;
  }
  it::Command c = it::run_shell("/usr/bin/unshare --pid --fork --mount-proc /bin/true");
  if (c.status != 0) why = "unshare --pid --fork --mount-proc failed: " + c.output;
  return c.status == 0;
}

std::string begin_and_params(std::uint16_t id, const fcgi_test::Params& params) {
  return fcgi_test::encode_record(RecordType::BeginRequest, id,
                                  fcgi_test::begin_request_body(fcgi_test::Role::Responder)) +
         fcgi_test::encode_stream(RecordType::Params, id, fcgi_test::encode_params(params));
}

} // namespace

TEST_SUITE("container life") {

  TEST_CASE("the master reaps an orphan of its --exec program (it is the workers' subreaper)") {
    HostOptions o;
    o.args = {"--workers", "1", "--log-level", "debug"};
    for (const std::string& w : orphan_making_program())
      o.args.push_back(w);
    HostProcess host(o);
    CHECK(host.wait_log(kOrphanReaped));
    CHECK(host.connect().request("GET", "/x").status == 200);
  }

  TEST_CASE("as PID 1 of a PID namespace: reaps the orphan, serves, and exits 0 after TERM") {
    std::string why;
    if (!can_make_pid_namespace(why))
      return test_support::skip("no PID namespace here (" + why + ")");
    HostOptions o;
    o.wrapper = {"/usr/bin/unshare", "--pid", "--fork", "--mount-proc", "--kill-child"};
    o.args = {"--workers", "1", "--log-level", "debug", "--graceful-timeout", "10"};
    for (const std::string& w : orphan_making_program())
      o.args.push_back(w);
    HostProcess host(o);
    REQUIRE(host.wait_log(R"(master 1 started)"));
    CHECK(host.wait_log(kOrphanReaped));
    CHECK(host.connect().request("GET", "/x").status == 200);
    // unshare passes no signal on: TERM goes to the host, its child (PID 1 inside).
    std::vector<pid_t> inside = it::child_pids(host.pid());
    REQUIRE(inside.size() == 1);
    ::kill(inside[0], SIGTERM);
    CHECK(host.wait_exit(Millis{10000}).value_or(-1) == 0); // unshare exits with its status
    CHECK(host.wait_log("master exits with code 0"));
  }

  TEST_CASE("once a graceful stop begins the ping answers 503 while the request in flight ends") {
    HostOptions o;
    o.args = {"--app",       "echo",  "--workers",          "1",
              "--ping-path", "/ping", "--graceful-timeout", "10"};
    o.status_socket = true;
    HostProcess host(o);
    const std::string status_socket = "unix:" + host.dir().file("status.sock");
    CHECK(host.connect().request("GET", "/ping").status == 200);
    CHECK(it::run_binary("ping --connect " + status_socket).status == 0);

    // In flight: a POST whose body is half sent. Beside it, a connection the worker accepted
    // and that has sent nothing yet (as nginx's next request would come).
    fcgi_test::Client in_flight = host.connect();
    in_flight.set_timeout(Millis{10000});
    const std::string body = "0123456789";
    in_flight.send_raw(begin_and_params(1, fcgi_test::standard_params("POST", "/echo", 10)) +
                       fcgi_test::encode_record(RecordType::Stdin, 1, body.substr(0, 5)));
    fcgi_test::Client next = host.connect();
    REQUIRE(host.wait_accepted());

    host.signal(SIGTERM);
    REQUIRE(!host.wait_status([](const std::string& json) { return it::has(json, "\"stopping\""); },
                              Millis{5000}, true)
                 .empty());
    // The master's ping (exit 1: unhealthy) and the worker's ping path both say so.
    it::Command master_ping = it::run_binary("ping --connect " + status_socket);
    CHECK(master_ping.status != 0);
    CHECK(master_ping.output.find("503") != std::string::npos);
    fcgi_test::Response ping = next.request("GET", "/ping");
    CHECK(ping.ended);
    CHECK(ping.status == 503);
    CHECK(ping.body == "stopping\n");

    // The request in flight still finishes, whole.
    in_flight.send_raw(fcgi_test::encode_record(RecordType::Stdin, 1, body.substr(5)) +
                       fcgi_test::encode_record(RecordType::Stdin, 1, ""));
    fcgi_test::Response r = in_flight.read_response(1);
    CHECK(r.ended);
    CHECK(r.status == 200);
    CHECK(r.body.find(body) != std::string::npos);
    CHECK(host.wait_exit(Millis{10000}).value_or(-1) == 0);
  }
}
