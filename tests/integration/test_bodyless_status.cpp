// Responses that carry no content (RFC 9110 6.4.1, 8.6): for 1xx and 204 the host writes no
// Content-Length and no body, for 304 no body and only the handler's own Content-Length, whatever
// the handler set, buffered or streamed; every other status keeps its length, HEAD keeps its
// rule. Read with the raw FastCGI test client: the bytes the host wrote, not a front server's
// repair of them.
#include "harness.hpp"

#include <doctest/doctest.h>

namespace {

using it::HostProcess;

struct Expect {
  int code;
  bool stream;
  const char* length; // the handler's own Content-Length ("" none)
  bool has_body;
  const char* content_length; // in the head ("" none)
};

} // namespace

TEST_SUITE("bodyless statuses") {

  TEST_CASE("1xx, 204 and 304: no body, no Content-Length but a 304's own, others keep theirs") {
    HostProcess host({"--app", FCGI_TEST_HANDLER_API_PLUGIN, "--workers", "1"});
    for (const Expect& e : std::vector<Expect>{{204, false, "", false, ""},
                                               {204, false, "7", false, ""},
                                               {204, true, "", false, ""},
                                               {100, false, "", false, ""},
                                               {103, true, "7", false, ""},
                                               {199, false, "", false, ""},
                                               {304, false, "", false, ""},
                                               {304, false, "7", false, "7"},
                                               {304, true, "", false, ""},
                                               {200, false, "", true, "7"},
                                               {200, true, "", true, ""},
                                               {404, false, "", true, "7"}}) {
      std::string uri = "/answer/" + std::to_string(e.code) + "?stream=" + (e.stream ? "1" : "0");
      if (*e.length) uri += std::string("&length=") + e.length;
      CAPTURE(uri);
      fcgi_test::Client c = host.connect();
      fcgi_test::Response r = c.request("GET", uri);
      INFO(r.stdout_raw);
      CHECK(r.status == e.code);
      CHECK(r.body.empty() == !e.has_body);
      CHECK(r.header("Content-Length").value_or("") == e.content_length);
      CHECK(r.stdout_raw.starts_with("Status: " + std::to_string(e.code)));
    }
  }

  TEST_CASE("HEAD keeps its rule: the length a GET would have, no body") {
    HostProcess host({"--app", FCGI_TEST_HANDLER_API_PLUGIN, "--workers", "1"});
    fcgi_test::Client c = host.connect();
    fcgi_test::Response r = c.request("HEAD", "/answer/200");
    CHECK(r.status == 200);
    CHECK(r.body.empty());
    CHECK(r.header("Content-Length").value_or("") == "7");
    fcgi_test::Client no_content = host.connect();
    fcgi_test::Response empty = no_content.request("HEAD", "/answer/204");
    CHECK(empty.status == 204);
    CHECK(!empty.header("Content-Length"));
  }
}
