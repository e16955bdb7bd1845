// A stop of the whole host (TERM) answers the kept connections other workers passed on just
// before it. A worker in a slow handler passes its kept connections to a worker the scoreboard
// shows free; if that one takes a slow request first, the connection waits in the handoff
// channel, and the TERM that comes meanwhile is read before the channel when both handlers end.
// The stopping worker takes the channel's connections as it takes its queued ones; left there,
// such a connection closed unanswered at the master's exit (nginx: 502 after the drain).
#include "app/router.hpp"
#include "fcgi_host/runners/in_process_host.hpp"
#include "fcgi_host/testing/fcgi_test_client.hpp"
#include "fcgi_host/worker/handoff_channel.hpp"
#include "fcgi_host/worker/worker.hpp"

#include <doctest/doctest.h>

#include <chrono>
#include <csignal>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {

// In the worker's thread, while its handler runs: the TERM first (pending until the handler
// returns, so the worker reads it before the channel), then a connection into the channel, as
// another worker's nudge passes one on.
class StoppedWhilePassedOn : public app::Router {
public:
  StoppedWhilePassedOn(const fcgi_host::HandoffChannel& channel, int passed_fd) {
    get("/stop-and-pass", [&channel, passed_fd](const app::Request&, app::Response& res) {
      pthread_kill(pthread_self(), SIGTERM);
      res.set_content(channel.send(passed_fd, {}) ? "passed\n" : "not passed\n", "text/plain");
    });
    get("/after",
        [](const app::Request&, app::Response& res) { res.set_content("served\n", "text/plain"); });
  }
};

} // namespace

TEST_CASE("a worker stopped by TERM answers the kept connection waiting in the handoff channel") {
  fcgi_host::HandoffChannel channel = fcgi_host::make_handoff_channel();
  int pair[2];
  REQUIRE(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair) == 0);
  fcgi_test::Client web_server(pair[0]); // its end of the kept connection passed on
  web_server.set_timeout(std::chrono::seconds(5));
  {
    StoppedWhilePassedOn router(channel, pair[1]);
    fcgi_host::WorkerSettings settings;
    settings.handoff = channel;
    fcgi_host::InProcessHost host(
        settings, [&router] { return fcgi_host::HandlerPtr(&router, [](app::Handler*) {}); });
    // The request is on the connection before it is passed on, as nginx wrote it.
    fcgi_test::Request after;
    after.uri = "/after";
    std::uint16_t id = web_server.send_request(after);
    {
      auto client = fcgi_test::Client::connect(host.address());
      CHECK(client.request("GET", "/stop-and-pass").body == "passed\n");
    }                 // closed: the stopping worker has nothing else to hold it
    ::close(pair[1]); // the channel holds the passed connection now
    fcgi_test::Response r = web_server.read_response(id);
    CHECK(r.status == 200);
    CHECK(r.body == "served\n");
    web_server.close();
  } // the worker has stopped; the channel's ends are this test's
  CHECK(channel.close_waiting() == 0);
  ::close(channel.send_fd);
  ::close(channel.recv_fd);
}
