// A request body the handler reads as it arrives (Router::post_stream, Request::body_reader()):
// the echo app's /stream route answers the size and FNV-1a hash of what it read, and says whether
// it read it as it arrived. Each test sends the head and part of the body, waits until the
// handler runs (the master's status socket), then sends the rest as the case needs. Every case
// runs with --threads 1 and 4 (request_modes.hpp).
#include "checks.hpp"
#include "request_modes.hpp"
#include "support/digest.hpp"
#include "support/proc.hpp"

#include <cstdint>
#include <cstdio>
#include <fstream>

using fcgi_test::Millis;
using fcgi_test::RecordType;
using it::HostOptions;
using it::HostProcess;

namespace {

std::string body_of(std::size_t n) {
  std::string b(n, '\0');
  for (std::size_t i = 0; i < n; ++i)
    b[i] = static_cast<char>('a' + (i * 7) % 26);
  return b;
}

HostProcess start_echo_host(std::vector<std::string> extra = {}) {
  HostOptions o;
  o.args = {"--app", "echo", "--workers", "1"};
  o.args.insert(o.args.end(), extra.begin(), extra.end());
  o.args = it::with_threads(o.args);
  o.status_socket = true;
  return HostProcess(o);
}

// BEGIN_REQUEST and the params of POST `uri` (CONTENT_LENGTH `length`, or none when negative).
std::string head(std::uint16_t id, const std::string& uri, long long length) {
  fcgi_test::Params params =
      fcgi_test::standard_params("POST", uri, length < 0 ? 0 : static_cast<std::size_t>(length),
                                 {{"CONTENT_TYPE", "application/octet-stream"}});
  if (length < 0)
    for (auto& p : params)
      if (p.first == "CONTENT_LENGTH") p.second = "";
  return fcgi_test::encode_record(
             RecordType::BeginRequest, id,
             fcgi_test::begin_request_body(fcgi_test::Role::Responder, fcgi_test::kKeepConn)) +
         fcgi_test::encode_stream(RecordType::Params, id, fcgi_test::encode_params(params));
}

// STDIN records of `record` bytes each; with the empty record that ends the body when `end`.
std::string stdin_records(std::uint16_t id, std::string_view data, std::size_t record, bool end) {
  std::string all = fcgi_test::encode_stream(RecordType::Stdin, id, data, record);
  if (!end) all.resize(all.size() - 8); // without the empty record
  return all;
}

} // namespace

TEST_SUITE("streamed body") {

  REQUEST_PATH_CASE("a body in 1-byte records is read as it arrives, and the connection is kept") {
    HostProcess host = start_echo_host();
    auto c = host.connect();
    const std::string body = body_of(3000);
    c.send_raw(head(1, "/stream?piece=100", 3000) + stdin_records(1, body.substr(0, 10), 1, false));
    REQUIRE(host.wait_serving("/stream?piece=100"));
    c.send_raw(stdin_records(1, body.substr(10), 1, true));
    fcgi_test::Response r = c.read_response(1);
    CHECK(r.status == 200);
    CHECK(r.body == "streamed=3000 fnv=" + test_support::fnv1a_hex(body) + " as it arrived\n");
    // The same connection serves the next request, a whole one.
    fcgi_test::Response next = c.request("POST", "/stream", "xyz");
    CHECK(next.body == "streamed=3 fnv=" + test_support::fnv1a_hex("xyz") + " whole\n");
  }

  REQUEST_PATH_CASE(
      "a handler that reads half the body: the rest is dropped, the connection kept") {
    HostProcess host = start_echo_host();
    auto c = host.connect();
    const std::string body = body_of(200'000);
    c.send_raw(head(1, "/stream?read=1000", 200'000) +
               stdin_records(1, body.substr(0, 100), 8192, false));
    REQUIRE(host.wait_serving("/stream?read=1000"));
    c.send_raw(stdin_records(1, body.substr(100), 32768, true));
    fcgi_test::Response r = c.read_response(1);
    CHECK(r.body == "streamed=1000 fnv=" + test_support::fnv1a_hex(body.substr(0, 1000)) +
                        " as it arrived\n");
    CHECK(c.request("GET", "/hello").status == 200);
  }

  REQUEST_PATH_CASE("a body over --max-body is refused with 413 in the middle of the stream") {
    HostProcess host = start_echo_host({"--max-body", "64K"});
    host.allow_log("request body over --max-body");
    auto c = host.connect();
    const std::string body = body_of(100'000);
    c.send_raw(head(1, "/stream", -1) + stdin_records(1, body.substr(0, 1000), 1000, false));
    REQUIRE(host.wait_serving("/stream"));
    c.send_raw(stdin_records(1, body.substr(1000), 16384, true));
    fcgi_test::Response r = c.read_response(1);
    CHECK(r.status == 413);
    // The connection closes after the answer: the rest of that body is not read.
    auto rest = c.read_until_closed(Millis{5000});
    CHECK(rest.status == fcgi_test::IoStatus::Closed);
    // The worker goes on serving.
    CHECK(host.connect().request("GET", "/hello").status == 200);
  }

  REQUEST_PATH_CASE("a client that stops sending gets 408 at the body's deadline") {
    HostProcess host = start_echo_host({"--body-timeout", "1", "--body-min-rate", "0"});
    host.allow_log("request body");
    auto c = host.connect();
    c.send_raw(head(1, "/stream", 5000) + stdin_records(1, body_of(100), 100, false));
    REQUIRE(host.wait_serving("/stream"));
    c.set_timeout(Millis{10'000});
    fcgi_test::Response r = c.read_response(1);
    CHECK(r.status == 408);
    CHECK(host.connect().request("GET", "/hello").status == 200);
  }

  REQUEST_PATH_CASE("a body cut short by the web server: logged, and the worker goes on") {
    HostProcess host = start_echo_host();
    host.expect_log("closed the connection in the middle of the body");
    {
      auto c = host.connect();
      c.send_raw(head(1, "/stream", 5000) + stdin_records(1, body_of(100), 100, false));
      REQUIRE(host.wait_serving("/stream"));
    } // closed
    CHECK(host.wait_log("closed the connection in the middle of the body"));
    CHECK(host.connect().request("GET", "/hello").status == 200);
  }

  REQUEST_PATH_CASE("multipart parts are parsed as the body arrives") {
    HostProcess host = start_echo_host();
    auto c = host.connect();
    const std::string file = body_of(300'000);
    std::string body = "--XyZ\r\nContent-Disposition: form-data; name=\"title\"\r\n\r\nhello\r\n"
                       "--XyZ\r\nContent-Disposition: form-data; name=\"upload\"; "
                       "filename=\"a.bin\"\r\n\r\n" +
                       file + "\r\n--XyZ--\r\n";
    fcgi_test::Params params =
        fcgi_test::standard_params("POST", "/stream-parts", body.size(),
                                   {{"CONTENT_TYPE", "multipart/form-data; boundary=XyZ"}});
    std::string first =
        fcgi_test::encode_record(
            RecordType::BeginRequest, 1,
            fcgi_test::begin_request_body(fcgi_test::Role::Responder, fcgi_test::kKeepConn)) +
        fcgi_test::encode_stream(RecordType::Params, 1, fcgi_test::encode_params(params)) +
        stdin_records(1, body.substr(0, 50), 50, false);
    c.send_raw(first);
    REQUIRE(host.wait_serving("/stream-parts"));
    c.send_raw(stdin_records(1, body.substr(50), 65535, true));
    fcgi_test::Response r = c.read_response(1);
    CHECK(r.body == "title=5\nupload=300000\n");
  }

  REQUEST_PATH_CASE("a 64 MiB streamed body: the worker's memory does not grow with it") {
    HostProcess host = start_echo_host({"--max-body", "128M", "--max-buffered", "256M"});
    auto workers = host.wait_workers(1);
    REQUIRE(workers.size() == 1);
    auto c = host.connect();
    CHECK(c.request("POST", "/stream", "warm up").status == 200);
    const long before = test_support::rss_kib(workers[0]);
    const std::size_t total = 64u << 20;
    const std::string piece = body_of(1 << 20);
    c.send_raw(head(1, "/stream", static_cast<long long>(total)) +
               stdin_records(1, piece.substr(0, 4096), 4096, false));
    REQUIRE(host.wait_serving("/stream"));
    long peak = before;
    for (std::size_t sent = 4096; sent < total;) {
      const std::size_t n = std::min(piece.size() - 4096, total - sent);
      c.send_raw(stdin_records(1, std::string_view(piece).substr(0, n), 32768, false));
      sent += n;
      peak = std::max(peak, test_support::rss_kib(workers[0]));
    }
    c.send_raw(stdin_records(1, "", 1, true));
    c.set_timeout(Millis{30'000});
    fcgi_test::Response r = c.read_response(1);
    CHECK(r.status == 200);
    CHECK(r.body.starts_with("streamed=67108864 "));
    INFO("RSS before " << before << " kB, peak " << peak << " kB");
    CHECK(peak - before < 8 * 1024); // a whole body would be 64 MiB
  }
}
