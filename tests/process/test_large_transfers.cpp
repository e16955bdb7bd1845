// Large bodies through the in-process host: a request body gathered as it arrives (straight into
// its storage, spilled or not) or read by the handler as it arrives, and large response chunks
// sent as records around the handler's bytes. Each body must arrive byte for byte, and what
// follows it on the connection (a pipelined request) must not be lost.
#include "app/router.hpp"
#include "fcgi_host/runners/in_process_host.hpp"
#include "fcgi_host/testing/fcgi_test_client.hpp"
#include "support/digest.hpp"

#include <doctest/doctest.h>

#include <cstdio>
#include <string>

using fcgi_test::RecordType;

namespace {

std::string body_of(std::size_t n, unsigned seed = 7) {
  std::string b(n, '\0');
  for (std::size_t i = 0; i < n; ++i)
    b[i] = static_cast<char>('A' + (i * seed + i / 1000) % 57);
  return b;
}

class Transfers : public app::Router {
public:
  Transfers() {
    post("/whole", [](const app::Request& req, app::Response& res) {
      res.body = std::to_string(req.body_size()) + " " + test_support::fnv1a_hex(req.body()) +
                 (req.body_spilled() ? " spilled" : " memory");
    });
    post_stream("/stream", [](const app::Request& req, app::Response& res) {
      std::string all;
      req.body_reader().read_all(all);
      res.body = std::to_string(all.size()) + " " + test_support::fnv1a_hex(all);
    });
    get("/chunks", [](const app::Request&, app::Response& res) {
      res.set_header("Content-Type", "application/octet-stream");
      // Sizes around the direct path's threshold and the records' 32 KiB.
      for (std::size_t n : {5ul, 16383ul, 16384ul, 32768ul, 100'000ul, 1ul, 70'000ul})
        if (!res.write(body_of(n, static_cast<unsigned>(n % 13 + 1)))) return;
    });
    get("/big", [](const app::Request&, app::Response& res) { res.body = body_of(1 << 20, 3); });
  }
};

std::string expected_chunks() {
  std::string all;
  for (std::size_t n : {5ul, 16383ul, 16384ul, 32768ul, 100'000ul, 1ul, 70'000ul})
    all += body_of(n, static_cast<unsigned>(n % 13 + 1));
  return all;
}

// One request's records, in records of `record` bytes of STDIN.
std::string request_bytes(std::uint16_t id, const std::string& method, const std::string& uri,
                          const std::string& body, std::size_t record = 32768) {
  return fcgi_test::encode_record(
             RecordType::BeginRequest, id,
             fcgi_test::begin_request_body(fcgi_test::Role::Responder, fcgi_test::kKeepConn)) +
         fcgi_test::encode_stream(
             RecordType::Params, id,
             fcgi_test::encode_params(fcgi_test::standard_params(method, uri, body.size()))) +
         fcgi_test::encode_stream(RecordType::Stdin, id, body, record);
}

} // namespace

TEST_CASE("large transfers: a body gathered as it arrives, in memory and spilled, with a "
          "pipelined request after it") {
  Transfers handler;
  fcgi_host::Limits limits;
  limits.spill_threshold = 256 * 1024;
  fcgi_host::InProcessHost host(handler, limits);
  auto c = fcgi_test::Client::connect(host.address());
  for (std::size_t size : {100'000ul, 200'000ul, 700'000ul})
    for (std::size_t record : {1000ul, 32768ul, 65535ul}) {
      CAPTURE(size);
      CAPTURE(record);
      const std::string body = body_of(size);
      c.send_raw(request_bytes(1, "POST", "/whole", body, record) +
                 request_bytes(2, "GET", "/big", ""));
      fcgi_test::Response r = c.read_response(1);
      CHECK(r.body == std::to_string(size) + " " + test_support::fnv1a_hex(body) +
                          (size > limits.spill_threshold ? " spilled" : " memory"));
      CHECK(c.read_response(2).body == body_of(1 << 20, 3));
    }
}

TEST_CASE("large transfers: a body the handler streams, with a pipelined request after it") {
  Transfers handler;
  fcgi_host::InProcessHost host(handler);
  auto c = fcgi_test::Client::connect(host.address());
  for (std::size_t size : {1ul, 70'000ul, 500'000ul}) {
    CAPTURE(size);
    const std::string body = body_of(size, 5);
    c.send_raw(request_bytes(1, "POST", "/stream", body, 8192) +
               request_bytes(2, "GET", "/chunks", ""));
    CHECK(c.read_response(1).body == std::to_string(size) + " " + test_support::fnv1a_hex(body));
    CHECK(c.read_response(2).body == expected_chunks());
  }
}

TEST_CASE("large transfers: streamed chunks and a large buffered body arrive whole, in records "
          "of the request") {
  Transfers handler;
  fcgi_host::InProcessHost host(handler);
  auto c = fcgi_test::Client::connect(host.address());
  fcgi_test::Request r;
  r.uri = "/chunks";
  r.id = 9;
  c.send_request(r);
  fcgi_test::Response chunks = c.read_response(9);
  CHECK(chunks.ended);
  CHECK(chunks.body == expected_chunks());
  CHECK(c.request("GET", "/big").body == body_of(1 << 20, 3));
}
