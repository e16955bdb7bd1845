// req/s of the hello app through nginx and through every other FastCGI front server Debian
// packages (tests/integration/front_servers.hpp, each running the snippet shipped in conf/), in
// each server's reuse modes, over a Unix socket and over TCP: 10 clients x 300 GETs, a new client
// connection per request. A measurement, not a check: scripts/bench-front.sh builds and runs it
// (docs/front-servers.md shows its figures). It runs the integration tests' harness, hence the
// doctest main; a server that is not installed is left out, saying so.
#include "front_servers.hpp"
#include "support/time.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <iostream>
#include <thread>

namespace {

// 10 clients x 300 GETs of the hello app through the server on `port`: req/s, or 0 after an
// error.
double rate_of(int port) {
  std::atomic<int> errors{0};
  auto start = test_support::Clock::now();
  std::vector<std::thread> clients;
  for (int c = 0; c < 10; ++c)
    clients.emplace_back([&] {
      for (int i = 0; i < 300 && errors == 0; ++i) {
        try {
          if (it::http_request(port, "GET", "/", {}, fcgi_test::Millis{10000}).body != "OK")
            ++errors;
        } catch (const std::exception&) {
          ++errors;
        }
      }
    });
  for (auto& t : clients)
    t.join();
  return errors == 0 ? 3000 / test_support::elapsed_s(start) : 0;
}

it::HostOptions hello_host(it::Listen listen) {
  it::HostOptions o;
  o.args = {"--app", "hello", "--workers", "2"};
  for (const std::string& a : it::reachable_socket_args())
    o.args.push_back(a);
  o.listen = listen;
  return o;
}

void report(const std::string& server, it::Listen listen, double rate) {
  std::cout << server << " over " << (listen == it::Listen::Tcp ? "TCP" : "a Unix socket") << ": "
            << static_cast<long>(rate) << " req/s" << std::endl;
}

} // namespace

TEST_CASE("req/s of 10 clients x 300 GETs through each front server") {
  using it::Front;
  for (it::Listen listen : {it::Listen::UnixSocket, it::Listen::Tcp}) {
    for (int keepalive : {0, 32}) { // the reference: nginx, as the tests run it
      it::HostProcess host(hello_host(listen));
      it::NginxProcess nginx({host.address(), keepalive});
      report("nginx keepalive " + std::to_string(keepalive), listen, rate_of(nginx.port()));
    }
    for (Front front : {Front::ApacheProxyPass, Front::ApacheSetHandler, Front::Lighttpd,
                        Front::Caddy, Front::H2o, Front::Haproxy}) {
      if (!it::front_installed(front)) {
        std::cout << it::front_name(front) << ": not installed, left out" << std::endl;
        continue;
      }
      const std::vector<it::ReuseMode>& modes = it::reuse_modes(front);
      for (std::size_t i = 0; i < modes.size() && i < 2; ++i) { // its own mode and the other
        it::HostProcess host(hello_host(listen));
        it::open_socket_dir(host);
        it::FrontServer server({front, host.address(), modes[i].edits});
        report(it::front_name(front) + " " + modes[i].name, listen, rate_of(server.port()));
      }
    }
  }
}
