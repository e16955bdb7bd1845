// One request path (decision 21): what a request meets — its body of any size, split or whole,
// read whole or as it arrives; a refusal; a handler that throws, sets a header that is none or
// crashes — is the same whether the handler runs inline (--threads 1) or on a handler thread
// (--threads 4). Every case runs in both modes (request_modes.hpp).
#include "checks.hpp"
#include "request_modes.hpp"
#include "support/digest.hpp"

#include <string>
#include <vector>

using fcgi_test::Millis;
using fcgi_test::RecordType;
using it::HostProcess;
using it::NginxProcess;

namespace {

// What the echo app's / answers for a POST of `body`: its params, a blank line, the body.
bool echoed_whole(const std::string& answer, const std::string& body) {
  return answer.size() >= body.size() + 2 &&
         answer.compare(answer.size() - body.size() - 2, std::string::npos, "\n\n" + body) == 0;
}

// What its /stream route answers: the size and hash of what body_reader() gave the handler.
std::string digest_of(const std::string& body) {
  return "streamed=" + std::to_string(body.size()) + " fnv=" + test_support::fnv1a_hex(body);
}

} // namespace

TEST_SUITE("one request path") {

  REQUEST_PATH_CASE("POST bodies of every size reach the handler whole through nginx") {
    HostProcess host(it::with_threads({"--app", "echo", "--workers", "2", "--max-body", "16M"}));
    NginxProcess nginx({host.address()});
    for (std::size_t size :
         {std::size_t{0}, std::size_t{1}, std::size_t{1000}, std::size_t{64 * 1024 - 1},
          std::size_t{64 * 1024 + 1}, std::size_t{70'000}, std::size_t{200'000},
          std::size_t{1} << 20, std::size_t{8} << 20}) {
      INFO("body of " << size << " bytes");
      const std::string body = it::pattern_body(size);
      it::HttpResponse whole = it::http_request(nginx.port(), "POST", "/echo", body, Millis{30000});
      CHECK(whole.status == 200);
      INFO("answered " << whole.body.size() << " bytes");
      CHECK(echoed_whole(whole.body, body));
      it::HttpResponse read =
          it::http_request(nginx.port(), "POST", "/stream", body, Millis{30000});
      CHECK(read.status == 200);
      CHECK(read.body.starts_with(digest_of(body) + " "));
    }
    // Chunked from the client (nginx buffers it and sends a length).
    for (std::size_t size : {std::size_t{70'000}, std::size_t{1} << 20}) {
      INFO("chunked body of " << size << " bytes");
      const std::string body = it::pattern_body(size);
      it::HttpResponse whole =
          it::http_request_chunked(nginx.port(), "POST", "/echo", body, 16384, Millis{30000});
      CHECK(whole.status == 200);
      CHECK(echoed_whole(whole.body, body));
    }
    it::check_no_alerts(host);
  }

  REQUEST_PATH_CASE("a 200 000-byte body sent in two pieces reaches the handler whole") {
    HostProcess host(it::with_threads({"--app", "echo", "--workers", "1"}));
    const std::string body = it::pattern_body(200'000);
    for (const std::string target : {"/echo", "/stream?piece=4096"}) {
      INFO(target);
      auto c = host.connect();
      fcgi_test::Params params = fcgi_test::standard_params(
          "POST", target, body.size(), {{"CONTENT_TYPE", "application/octet-stream"}});
      const std::string records =
          fcgi_test::encode_record(
              RecordType::BeginRequest, 1,
              fcgi_test::begin_request_body(fcgi_test::Role::Responder, fcgi_test::kKeepConn)) +
          fcgi_test::encode_stream(RecordType::Params, 1, fcgi_test::encode_params(params)) +
          fcgi_test::encode_stream(RecordType::Stdin, 1, body, 32768);
      // The head and the first 1 000 bytes of the body, a pause (the scenario: a client that
      // sends in bursts), then the rest.
      const std::size_t first = records.find(body.substr(0, 16)) + 1000;
      c.send_raw(records.substr(0, first));
      test_wait::hold_for(Millis{200});
      c.send_raw(records.substr(first));
      fcgi_test::Response r = c.read_response(1);
      CHECK(r.status == 200);
      if (target == "/echo")
        CHECK(echoed_whole(r.body, body));
      else
        CHECK(r.body.starts_with(digest_of(body) + " "));
      // The connection serves its next request.
      CHECK(c.request("GET", "/echo").status == 200);
    }
  }

  REQUEST_PATH_CASE("a body over --max-body is refused with 413, and the worker serves on") {
    HostProcess host(it::with_threads({"--app", "echo", "--workers", "1", "--max-body", "100K"}));
    NginxProcess nginx({host.address()});
    CHECK(it::http_request(nginx.port(), "POST", "/echo", std::string(300'000, 'x'), Millis{20000})
              .status == 413);
    CHECK(
        it::http_request(nginx.port(), "POST", "/stream", std::string(300'000, 'x'), Millis{20000})
            .status == 413);
    it::HttpResponse after = it::http_request(nginx.port(), "POST", "/echo", "small");
    CHECK(after.status == 200);
    CHECK(echoed_whole(after.body, "small"));
  }

  REQUEST_PATH_CASE("a handler that throws: 500, one log line, and the worker serves on") {
    HostProcess host(it::with_threads({"--app", "echo", "--workers", "1"}));
    NginxProcess nginx({host.address()});
    it::HttpResponse r = it::http_request(nginx.port(), "GET", "/throw?n=1");
    CHECK(r.status == 500);
    CHECK(r.body == "Internal Server Error\n");
    CHECK(host.wait_log("handler failed on GET /throw\\?n=1 \\(request id [^)]+\\): echo app: "
                        "/throw asked for an exception"));
    CHECK(it::http_request(nginx.port(), "GET", "/echo").status == 200);
    CHECK(it::lines_with(host.log(), "handler failed on").size() == 1);
  }

  REQUEST_PATH_CASE("a response header that is none: the host's 500 and a line naming it") {
    HostProcess host(it::with_threads({"--app", FCGI_TEST_HANDLER_API_PLUGIN, "--workers", "1"}));
    NginxProcess nginx({host.address()});
    it::HttpResponse r = it::http_request(nginx.port(), "GET", "/bad-header");
    CHECK(r.status == 500);
    CHECK_FALSE(r.header("X-Injected"));
    CHECK(host.wait_log("response header \"X-Bad\" to GET /bad-header is not a valid header"));
    CHECK(it::lines_with(host.log(), "larger than --max-response-head").empty());
  }

  REQUEST_PATH_CASE("a handler that crashes: its client gets 502, the next request is served") {
    HostProcess host(it::with_threads({"--app", "echo", "--workers", "1"}));
    NginxProcess nginx({host.address()});
    CHECK(it::http_request(nginx.port(), "GET", "/crash").status == 502);
    CHECK(host.wait_log("GET /crash"));
    it::HttpResponse after = it::http_request(nginx.port(), "GET", "/echo", {}, Millis{15000});
    CHECK(after.status == 200);
  }

  REQUEST_PATH_CASE("a request past --request-timeout ends, one line of one form names it and "
                    "its thread, and the next request is served") {
    HostProcess host(it::with_threads(
        {"--app", "echo", "--workers", "1", "--request-timeout", "1", "--graceful-timeout", "3"}));
    NginxProcess nginx({host.address()});
    // Inline, the master kills the worker (nginx: 502); on a thread, the worker cuts the request
    // (504) and is replaced once its other requests are done.
    const int status =
        it::http_request(nginx.port(), "GET", "/echo?delay_ms=10000", {}, Millis{15000}).status;
    CHECK(status >= 502);
    CHECK(status <= 504);
    CHECK(host.wait_log(R"(: request "GET /echo\?delay_ms=10000", request id [^,]+, thread 0 )"
                        R"(\(tid \d+\), ran for [0-9.]+ s past --request-timeout \(1.0 s\): )",
                        Millis{5000}));
    CHECK(it::http_request(nginx.port(), "GET", "/echo?after=1", {}, Millis{15000}).status == 200);
    CHECK(it::lines_with(host.log(), "past --request-timeout").size() == 1);
  }

} // TEST_SUITE
