// A handler that fails after its head went out: the response is cut (no FCGI_END_REQUEST), so
// nginx sees the upstream close early and the client an incomplete transfer, never a clean end
// that looks whole; the access log and the metrics count it as a 500.
#include "checks.hpp"
#include "request_modes.hpp"

#include <array>
#include <cstdio>
#include <sys/wait.h>

using fcgi_test::Millis;
using it::HostProcess;

namespace {

// curl's exit code for a GET (0: a whole transfer), run through the shell with a bounded time.
int curl_exit(int port, const std::string& path) {
  std::string cmd = "curl -s -o /dev/null -m 10 http://127.0.0.1:" + std::to_string(port) + path;
  int status = std::system(cmd.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

} // namespace

TEST_SUITE("cut response") {

  TEST_CASE("a handler that throws after write(): the client's transfer is incomplete, logged "
            "and counted as a 500") {
    HostProcess host({"--app", FCGI_TEST_CUT_RESPONSE_PLUGIN, "--workers", "1", "--access-log",
                      "{dir}/access.log", "--status-path", "/status"});
    it::NginxProcess nginx({host.address()});
    CHECK(curl_exit(nginx.port(), "/whole") == 0);
    // 18: the head went out, the body was cut; 52: nginx had not sent the head yet (it buffers
    // the upstream's response) and closed without it. Either way the client knows.
    int cut = curl_exit(nginx.port(), "/cut");
    CHECK((cut == 18 || cut == 52));
    // The same over raw FastCGI: the first half, then the close, and no END_REQUEST.
    fcgi_test::Client c = host.connect();
    fcgi_test::Response r = c.request("GET", "/cut");
    CHECK_FALSE(r.ended);
    CHECK(r.body.find("first half") != std::string::npos);
    CHECK(it::wait_for(
        [&] {
          return it::read_file(host.dir().file("access.log")).find(" 500 ") != std::string::npos;
        },
        Millis{5000}));
    std::string status = host.connect().request("GET", "/status").body;
    INFO(status);
    CHECK(it::lines_with(host.log(), "(response cut)").size() == 2);
    CHECK(it::read_file(host.dir().file("access.log")).find("/cut") != std::string::npos);
    INFO("nginx: " << nginx.error_log());
    CHECK(nginx.error_log().find("unsupported FastCGI protocol version: 0") != std::string::npos);
    // The worker goes on.
    CHECK(curl_exit(nginx.port(), "/whole") == 0);
    it::check_no_alerts(host);
  }

  REQUEST_PATH_CASE("a request whose client left during a long handler is logged and counted "
                    "as 499") {
    HostProcess host(it::with_threads({"--app", "echo", "--workers", "1", "--access-log",
                                       "{dir}/access.log", "--status-path", "/status"}));
    it::NginxProcess nginx({host.address()});
    // curl gives up after 0.3 s; nginx then closes its connection to the host, while the
    // handler still sleeps.
    std::string cmd =
        "curl -s -o /dev/null -m 0.3 'http://127.0.0.1:" + std::to_string(nginx.port()) +
        "/echo?delay_ms=800'";
    CHECK(std::system(cmd.c_str()) != 0);
    CHECK(it::wait_for(
        [&] {
          return it::read_file(host.dir().file("access.log")).find(" 499 ") != std::string::npos;
        },
        Millis{5000}));
    std::string status = host.connect().request("GET", "/status?json").body;
    INFO(status);
    CHECK(status.find("\"aborted requests\":1") != std::string::npos);
  }
}
