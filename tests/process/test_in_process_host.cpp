// A handler tested in-process with the raw FastCGI client, through the real worker loop.
#include "app/router.hpp"
#include "fcgi_host/runners/in_process_host.hpp"
#include "fcgi_host/testing/fcgi_test_client.hpp"

#include <doctest/doctest.h>

#include <stdexcept>
#include <string>
#include <sys/stat.h>

namespace {

class Greeter : public app::Router {
public:
  Greeter() {
    get("/hello", [](const app::Request& req, app::Response& res) {
      res.set_content("Hello, " + std::string(req.query_arg("name")) + "\n", "text/plain");
    });
    post("/upper", [](const app::Request& req, app::Response& res) {
      std::string out = req.body();
      for (char& c : out)
        c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      res.set_content(out, "text/plain");
    });
    get("/fail", [](const app::Request&, app::Response&) { throw std::runtime_error("boom"); });
  }
};

} // namespace

TEST_CASE("in-process host: a handler answers the test client through the worker loop") {
  Greeter greeter;
  std::string socket_path;
  {
    fcgi_host::InProcessHost host(greeter);
    socket_path = host.address().substr(5);
    auto client = fcgi_test::Client::connect(host.address());
    fcgi_test::Response hello = client.request("GET", "/hello?name=tests");
    CHECK(hello.status == 200);
    CHECK(hello.body == "Hello, tests\n");
    CHECK(hello.header("Content-Type") == std::optional<std::string>("text/plain"));
    // The same kept connection: POST with a body, a 405, a 404, a handler exception.
    CHECK(client.request("POST", "/upper", "abc").body == "ABC");
    CHECK(client.request("POST", "/hello").status == 405);
    CHECK(client.request("GET", "/nowhere").status == 404);
    CHECK(client.request("GET", "/fail").status == 500);
    CHECK(client.request("GET", "/hello?name=again").body == "Hello, again\n");
  }
  struct stat st;
  CHECK(stat(socket_path.c_str(), &st) != 0); // the socket is gone with the host
}

TEST_CASE("in-process host: the limits apply") {
  Greeter greeter;
  fcgi_host::Limits limits;
  limits.request.max_body = 4;
  fcgi_host::InProcessHost host(greeter, limits);
  auto client = fcgi_test::Client::connect(host.address());
  CHECK(client.request("POST", "/upper", "too long").status == 413);
}

TEST_CASE("in-process host: two hosts serve side by side, each its own handler") {
  // libfcgi's I/O hooks find their request by fd, not in a process-wide slot: hosts in threads
  // of one process do not see each other's requests.
  Greeter greeter;
  class Other : public app::Handler {
    void handle(const app::Request&, app::Response& res) override {
      res.set_content("other\n", "text/plain");
    }
  } other;
  fcgi_host::InProcessHost a(greeter);
  fcgi_host::InProcessHost b(other);
  auto ca = fcgi_test::Client::connect(a.address());
  auto cb = fcgi_test::Client::connect(b.address());
  for (int i = 0; i < 20; ++i) {
    CHECK(ca.request("GET", "/hello?name=a").body == "Hello, a\n");
    CHECK(cb.request("GET", "/hello?name=b").body == "other\n");
  }
  // Interleaved on the wire: both requests sent before either answer is read.
  fcgi_test::Request ra;
  ra.uri = "/hello?name=first";
  ra.keep_conn = true;
  fcgi_test::Request rb;
  rb.uri = "/x";
  rb.keep_conn = true;
  std::uint16_t ida = ca.send_request(ra);
  std::uint16_t idb = cb.send_request(rb);
  CHECK(cb.read_response(idb).body == "other\n");
  CHECK(ca.read_response(ida).body == "Hello, first\n");
}
