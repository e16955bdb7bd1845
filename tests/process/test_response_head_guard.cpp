// The response head guard (--max-response-head, 4 KiB by default = nginx's fastcgi_buffer_size):
// a larger head is answered with a whole 500 instead of reaching the web server, which would
// answer 502 without saying why; the connection and the next request are unharmed.
#include "app/router.hpp"
#include "fcgi_host/runners/in_process_host.hpp"
#include "fcgi_host/testing/fcgi_test_client.hpp"

#include <doctest/doctest.h>

#include <string>

namespace {

// "Status: 200 OK\r\n" + "X-Pad: <n>\r\n" + "Content-Length: 2\r\n" + "\r\n": 46 + n bytes.
constexpr std::size_t kHeadAround = 46;

class Padded : public app::Router {
public:
  Padded() {
    get("/pad", [](const app::Request& req, app::Response& res) {
      res.set_header("X-Pad", std::string(std::stoul(std::string(req.query_arg("n"))), 'p'));
      res.body = "OK";
    });
    get("/stream", [](const app::Request& req, app::Response& res) {
      res.set_header("X-Pad", std::string(std::stoul(std::string(req.query_arg("n"))), 'p'));
      for (int i = 0; i < 5; ++i)
        if (!res.write("chunk\n")) return;
    });
  }
};

std::size_t head_bytes(const fcgi_test::Response& r) {
  return r.stdout_raw.find("\r\n\r\n") + 4;
}

} // namespace

TEST_CASE("response head guard: a head that fits 4 KiB with its record header passes, one byte "
          "more is a whole 500") {
  Padded handler;
  fcgi_host::InProcessHost host(handler);
  auto client = fcgi_test::Client::connect(host.address());
  // 8: the STDOUT record's header; 1: a head that fills nginx's buffer exactly loses its body.
  const std::size_t at_limit = 4096 - 8 - 1 - kHeadAround;
  fcgi_test::Response fits = client.request("GET", "/pad?n=" + std::to_string(at_limit));
  CHECK(fits.status == 200);
  CHECK(head_bytes(fits) == 4087);
  CHECK(fits.body == "OK");

  fcgi_test::Response over = client.request("GET", "/pad?n=" + std::to_string(at_limit + 1));
  CHECK(over.ended);
  CHECK(over.status == 500);
  CHECK(over.body == "Internal Server Error\n");
  CHECK_FALSE(over.header("X-Pad"));

  // The same kept connection serves on.
  CHECK(client.request("GET", "/pad?n=10").body == "OK");
}

TEST_CASE("response head guard: a streamed response's large head is a 500, its chunks dropped") {
  Padded handler;
  fcgi_host::InProcessHost host(handler);
  auto client = fcgi_test::Client::connect(host.address());
  fcgi_test::Response over = client.request("GET", "/stream?n=8000");
  CHECK(over.ended);
  CHECK(over.status == 500);
  CHECK(over.body == "Internal Server Error\n");
  fcgi_test::Response small = client.request("GET", "/stream?n=10");
  CHECK(small.status == 200);
  CHECK(small.body == "chunk\nchunk\nchunk\nchunk\nchunk\n");
}

// A handler's header that is none (a name with ": " or CR, a value with CR, LF or NUL) would
// let a request's data set headers of its choosing (X-Accel-Redirect: any file nginx can read):
// never sent, a whole 500 instead, and the kept connection serves on.
TEST_CASE("response head guard: a header name with \": \" or CR, or a value with CR, LF or NUL, "
          "is a 500") {
  app::Router router;
  router.get("/name", [](const app::Request& req, app::Response& res) {
    res.set_header(req.query_arg("n"), "v");
    res.body = "OK";
  });
  router.get("/value", [](const app::Request& req, app::Response& res) {
    res.set_header("X-V", req.query_arg("v"));
    res.body = "OK";
  });
  router.get("/streamed", [](const app::Request& req, app::Response& res) {
    res.headers.emplace_back(req.query_arg("n"), "v");
    res.write("chunk\n");
  });
  fcgi_host::InProcessHost host(router);
  auto client = fcgi_test::Client::connect(host.address());
  for (std::string target :
       {"/name?n=X-A%3A%20b%0D%0AX-Accel-Redirect%3A%20/internal/etc/passwd", "/name?n=X-A%0D",
        "/name?n=X-Accel-Redirect%3A%20/etc/passwd", "/name?n=", "/value?v=a%0D%0AX-B%3A%20c",
        "/value?v=a%0Ab", "/value?v=a%00b", "/streamed?n=A%20B"}) {
    fcgi_test::Response r = client.request("GET", target);
    CHECK_MESSAGE(r.ended, target);
    CHECK_MESSAGE(r.status == 500, target);
    CHECK_MESSAGE(r.body == "Internal Server Error\n", target);
    CHECK_FALSE(r.header("X-Accel-Redirect"));
    CHECK_FALSE(r.header("X-B"));
  }
  fcgi_test::Response ok = client.request("GET", "/value?v=fine");
  CHECK(ok.status == 200);
  CHECK(ok.header("X-V"));
  CHECK(ok.body == "OK");
}
