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
