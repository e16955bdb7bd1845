// Behind every FastCGI front server Debian packages besides nginx (tests/integration/
// front_servers.hpp), each running the snippet shipped in conf/, over a Unix socket and over TCP,
// with and without its connection reuse: a GET with a query, HEAD, a 1 MiB POST, a chunked
// POST, a crashing handler (the server answers 5xx and the next request works), and a reload
// (HUP) under load with 0 failed requests. A server that is not installed is skipped, saying so.
#include "checks.hpp"
#include "front_servers.hpp"
#include "lifecycle_load.hpp"
#include "support/skip.hpp"

#include <csignal>
#include <cstdint>

using fcgi_test::Millis;
using it::Front;
using it::FrontServer;
using it::HostOptions;
using it::HostProcess;

namespace {

std::string transport_name(it::Listen listen) {
  return listen == it::Listen::Tcp ? "TCP" : "a Unix socket";
}

// HAProxy 2.6 forwards a chunked body only when it fits in one buffer (15 KiB by default) and
// answers a larger one 400 itself, before it connects (conf/haproxy-fcgi-host.cfg).
constexpr std::size_t kHaproxyChunkedFits = 12 * 1024;

void check_requests(const FrontServer& front, Front kind) {
  it::HttpResponse get = it::http_request(front.port(), "GET", "/echo/hi?x=1&y=%20");
  CHECK(get.status == 200);
  CHECK(get.body.find("\npath=/echo/hi\n") != std::string::npos);
  CHECK(get.body.find("\nquery=x=1&y=%20\n") != std::string::npos);
  if (it::front_stamps_requests(kind)) { // the params the host's queue time and logs use
    CHECK(get.body.find("\nparam HTTP_X_REQUEST_START=t=") != std::string::npos);
    CHECK(get.body.find("\nparam HTTP_X_REQUEST_ID=") != std::string::npos);
  }

  it::HttpResponse head = it::http_request(front.port(), "HEAD", "/echo");
  CHECK(head.status == 200);
  CHECK(head.body.empty());

  const std::string body = it::pattern_body(1 << 20);
  it::HttpResponse post = it::http_request(front.port(), "POST", "/echo", body, Millis{20000});
  CHECK(post.status == 200);
  bool intact = it::ends_with(post.body, "\n\n" + body);
  CHECK(intact);

  // An upload of unknown length: the handler gets the whole body, whatever CONTENT_LENGTH the
  // server sends for it (none, -1, or the length it counted after buffering).
  const std::string chunked =
      it::pattern_body(kind == Front::Haproxy ? kHaproxyChunkedFits : 100 * 1024);
  it::HttpResponse up =
      it::http_request_chunked(front.port(), "POST", "/echo", chunked, 4096, Millis{20000});
  CHECK(up.status == 200);
  bool chunked_intact = it::ends_with(up.body, "\n\n" + chunked);
  CHECK(chunked_intact);
  if (kind == Front::Haproxy) // the documented limit: HAProxy's own 400
    CHECK(it::http_request_chunked(front.port(), "POST", "/echo", it::pattern_body(100 * 1024),
                                   4096, Millis{20000})
              .status == 400);
}

// The handler aborts its worker: the server answers an error, and the next request is served
// (the other worker, or the one the master respawned). The dead worker's idle kept connections
// die with it; HAProxy with `http-reuse always` may send the next request on one of them and
// answer it 502 (seen in about one check of five; docs/front-servers.md), then it serves on. Behind
// every other server and mode the very next request is served.
void check_crash(const FrontServer& front, bool next_is_served) {
  int status = it::http_request(front.port(), "GET", "/crash").status;
  CHECK(status >= 500);
  CHECK(status <= 503);
  int failed = 0;
  while (!next_is_served && failed < 3 &&
         it::http_request(front.port(), "GET", "/echo").status == 502)
    ++failed;
  for (int i = 0; i < 5; ++i)
    CHECK(it::http_request(front.port(), "GET", "/echo").status == 200);
  if (failed > 0) MESSAGE(failed << " request(s) after the crash got HAProxy's 502");
}

void check_reload_under_load(const FrontServer& front, HostProcess& host) {
  it::HttpLoad load(front.port(), "/echo", 3, 3000);
  REQUIRE(load.wait_more(30));
  std::size_t done = it::lines_with(host.log(), "ready; retiring").size();
  host.signal(SIGHUP);
  CHECK(host.wait_log("ready; retiring", Millis{15000}, done + 1));
  CHECK(load.wait_more(30));
  load.stop();
  INFO("first error: " << load.first_error());
  CHECK(load.failures() == 0);
  CHECK(load.samples().size() >= 60);
}

// Connections the host accepted so far (its master's status page; counted at the accept).
long accepted(const HostProcess& host) {
  return it::json_number(host.status_json(), "accepted conn");
}

// 20 GETs one after the other: a server that reuses its connections makes fewer than 20.
void check_reuse(const FrontServer& front, const HostProcess& host, bool reuses) {
  long before = accepted(host);
  for (int i = 0; i < 20; ++i)
    REQUIRE(it::http_request(front.port(), "GET", "/echo").status == 200);
  long made = accepted(host) - before;
  INFO("connections for 20 requests: " << made);
  if (reuses)
    CHECK(made < 20);
  else
    CHECK(made >= 20);
}

void check_mode(Front front, it::Listen listen, const std::string& what,
                const it::ReuseMode& mode) {
  INFO(what);
  HostOptions o;
  o.args = {"--app", "echo", "--workers", "2"};
  for (const std::string& a : it::reachable_socket_args())
    o.args.push_back(a);
  o.listen = listen;
  o.status_socket = true;
  HostProcess host(o);
  it::open_socket_dir(host);
  FrontServer server({front, host.address(), mode.edits});
  INFO("the server's log:\n" << server.log() << "\nits snippet:\n" << server.snippet());
  check_requests(server, front);
  check_reuse(server, host, mode.reuses);
  check_crash(server, !(front == Front::Haproxy && mode.reuses));
  check_reload_under_load(server, host);
}

// Checks the server in its reuse modes (it::reuse_modes), the first `most` of them.
void run_front(Front front, it::Listen listen, std::size_t most = SIZE_MAX) {
  const std::string name = it::front_name(front) + " over " + transport_name(listen);
  if (!it::front_installed(front)) {
    return test_support::skip(it::front_name(front) +
                              " is not installed (scripts/test.sh installs it)");
  }
  const std::vector<it::ReuseMode>& modes = it::reuse_modes(front);
  for (std::size_t i = 0; i < modes.size() && i < most; ++i) {
    const it::ReuseMode& mode = modes[i];
    check_mode(front, listen, name + ", " + mode.name, mode);
    MESSAGE(name << ", " << mode.name << ": checked");
  }
}

} // namespace

TEST_SUITE("front servers") {

  TEST_CASE("Apache ProxyPass over a Unix socket, enablereuse on and off") {
    run_front(Front::ApacheProxyPass, it::Listen::UnixSocket);
  }
  TEST_CASE("Apache ProxyPass over TCP, enablereuse on and off") {
    run_front(Front::ApacheProxyPass, it::Listen::Tcp);
  }
  TEST_CASE("Apache SetHandler over a Unix socket") {
    run_front(Front::ApacheSetHandler, it::Listen::UnixSocket);
  }
  TEST_CASE("Apache SetHandler over TCP") {
    run_front(Front::ApacheSetHandler, it::Listen::Tcp);
  }
  TEST_CASE("lighttpd over a Unix socket") {
    run_front(Front::Lighttpd, it::Listen::UnixSocket);
  }
  TEST_CASE("lighttpd over TCP") {
    run_front(Front::Lighttpd, it::Listen::Tcp);
  }
  TEST_CASE("Caddy over a Unix socket") {
    run_front(Front::Caddy, it::Listen::UnixSocket);
  }
  TEST_CASE("Caddy over TCP") {
    run_front(Front::Caddy, it::Listen::Tcp);
  }
  TEST_CASE("h2o over a Unix socket, keepalive on and off") {
    run_front(Front::H2o, it::Listen::UnixSocket);
  }
  TEST_CASE("h2o over TCP, keepalive on and off") {
    run_front(Front::H2o, it::Listen::Tcp);
  }
  TEST_CASE("HAProxy over a Unix socket, every fcgi-app connection mode") {
    run_front(Front::Haproxy, it::Listen::UnixSocket);
  }
  TEST_CASE("HAProxy over TCP, keep-conn on and off") {
    run_front(Front::Haproxy, it::Listen::Tcp, 2);
  }

} // TEST_SUITE
