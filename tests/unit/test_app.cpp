// The handler API: Request lookups, Response headers, the router's 404 and 405.
#include "app/builtin_apps.hpp"
#include "app/host_access.hpp"
#include "app/request.hpp"
#include "app/response.hpp"
#include "app/router.hpp"

#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

namespace {

app::Request make_request(std::string method, std::string uri) {
  app::Request r;
  r.add_param("REQUEST_METHOD", method);
  r.add_param("REQUEST_URI", uri);
  auto q = uri.find('?');
  r.add_param("QUERY_STRING", q == std::string::npos ? "" : uri.substr(q + 1));
  r.add_param("HTTP_X_REQUEST_ID", "abc");
  r.add_param("CONTENT_TYPE", "text/plain");
  r.finish_params();
  return r;
}

} // namespace

TEST_CASE("request fields come from the params") {
  app::Request r = make_request("GET", "/a/b?x=1&y=&z=3");
  CHECK(r.method() == "GET");
  CHECK(r.path() == "/a/b");
  CHECK(r.query() == "x=1&y=&z=3");
  CHECK(r.query_arg("x") == "1");
  CHECK(r.query_arg("z") == "3");
  CHECK(r.query_arg("y").empty());
  CHECK(r.query_arg("nope").empty());
  CHECK(r.header("x-request-id") == "abc");
  CHECK(r.header("X-Request-Id") == "abc");
  CHECK(r.header("Content-Type") == "text/plain");
  CHECK(r.header("missing").empty());
  CHECK_FALSE(r.aborted());
}

TEST_CASE("a repeated param: the last value wins") {
  app::Request r;
  r.add_param("A", "1");
  r.add_param("A", "2");
  r.finish_params();
  CHECK(r.param("A") == "2");
  CHECK(r.param_count() == 2);
}

TEST_CASE("wire params are read in place, between the params added before and after them") {
  // The params' bytes as sent: name then value, each pair right after the one before.
  const std::string wire = "REQUEST_METHODGET"
                           "CONTENT_LENGTH"
                           "HTTP_X_IDwire"
                           "HTTP_ACCEPTtext/html";
  const app::WireParam params[] = {{0, 14, 3}, {17, 14, 0}, {31, 9, 4}, {44, 11, 9}};
  app::Request r;
  r.add_param_view("FCGI_ROLE", "RESPONDER");
  app::HostAccess::set_wire_params(r, wire.data(), params, 4, 2); // CONTENT_LENGTH left out
  r.add_param("CONTENT_LENGTH", "5");
  r.add_param("HTTP_ACCEPT", "*/*");
  r.finish_params();

  REQUIRE(r.param_count() == 6);
  const char* order[] = {"FCGI_ROLE",   "REQUEST_METHOD", "HTTP_X_ID",
                         "HTTP_ACCEPT", "CONTENT_LENGTH", "HTTP_ACCEPT"};
  for (std::size_t i = 0; i < 6; ++i)
    CHECK(r.param_at(i).name == order[i]);
  CHECK(r.param_at(3).value == "text/html");
  CHECK(r.method() == "GET");
  CHECK(r.param("CONTENT_LENGTH") == "5"); // the wire's empty one is left out
  CHECK(r.header("Content-Length") == "5");
  CHECK(r.param("HTTP_ACCEPT") == "*/*"); // the last value wins, across both kinds
  CHECK(r.header("x-id") == "wire");
  CHECK(r.has_param("HTTP_X_ID"));
  CHECK_FALSE(r.has_param("HTTP_X_IDwire"));
  std::string headers;
  r.for_each_header([&](std::string_view n, std::string_view v) {
    headers.append(n).append("=").append(v).append(";");
  });
  CHECK(headers == "HTTP_X_ID=wire;HTTP_ACCEPT=text/html;HTTP_ACCEPT=*/*;");

  r.clear();
  CHECK(r.param_count() == 0);
  CHECK(r.param("REQUEST_METHOD").empty());
  app::HostAccess::set_wire_params(r, wire.data(), params,
                                   4); // nothing left out, nothing around it
  CHECK(r.param_count() == 4);
  CHECK(r.param_at(1).name == "CONTENT_LENGTH");
  CHECK(r.param("CONTENT_LENGTH").empty());
  CHECK(r.has_param("CONTENT_LENGTH"));
}

TEST_CASE("a cleared request keeps nothing") {
  app::Request r = make_request("POST", "/x");
  r.set_body("data");
  r.clear();
  CHECK(r.param_count() == 0);
  CHECK(r.method().empty());
  CHECK(r.body().empty());
}

TEST_CASE("response headers") {
  app::Response res;
  res.set_header("Content-Type", "a");
  res.set_header("content-type", "b");
  res.add_header("Set-Cookie", "1");
  res.add_header("Set-Cookie", "2");
  CHECK(res.headers.size() == 3);
  CHECK(res.header("CONTENT-TYPE") == "b");
  CHECK(app::reason_phrase(404) == "Not Found");
  CHECK(app::reason_phrase(418) == "I'm a teapot");
  CHECK(app::reason_phrase(499) == "Client Error");
  CHECK(app::reason_phrase(299) == "Success");
  CHECK(app::reason_phrase(799) == "Nonstandard Status");
}

TEST_CASE("streaming without a host keeps the bytes in body, with a sink it sends the head once") {
  app::Response direct;
  CHECK(direct.write("x"));
  CHECK(direct.write("y"));
  CHECK(direct.head_sent());
  CHECK(direct.body == "xy");
  app::Response res;
  struct Capture : app::BodySink {
    int heads = 0;
    std::string body;
    void send_head(const app::Response&) override { ++heads; }
    bool send_body(std::string_view chunk) override {
      body.append(chunk);
      return true;
    }
  } sink;
  res.reset(&sink);
  CHECK(res.write("ab"));
  CHECK(res.write("cd"));
  CHECK(sink.heads == 1);
  CHECK(sink.body == "abcd");
  CHECK(res.head_sent());
}

TEST_CASE("finish(): the host's end is called once, writing or finishing after it is ignored and "
          "noted, until the next request") {
  struct CountingEnd : app::ResponseEnd {
    int ends = 0;
    void end_response(app::Response&) override { ++ends; }
  } end;
  app::Response res;
  res.set_end(&end);
  res.reset(nullptr);
  res.set_content("answered", "text/plain");
  CHECK_FALSE(res.finished());
  res.finish();
  CHECK(res.finished());
  CHECK(end.ends == 1);
  CHECK_FALSE(res.used_after_finish());
  CHECK_FALSE(res.write("late"));
  CHECK_FALSE(res.flush());
  res.finish();
  CHECK(end.ends == 1);
  CHECK(res.used_after_finish());
  CHECK(res.body == "answered");
  res.reset(nullptr); // the next request: the end is kept, the marks are not
  CHECK_FALSE(res.finished());
  CHECK_FALSE(res.used_after_finish());
  res.finish();
  CHECK(end.ends == 2);
  // Without a host (a direct unit test of a handler): only marked.
  app::Response direct;
  direct.finish();
  CHECK(direct.finished());
}

TEST_CASE("router: match, prefix, 404, 405") {
  app::Router router;
  std::string hit;
  router.get("/items", [&](const app::Request&, app::Response&) { hit = "get items"; });
  router.post("/items", [&](const app::Request&, app::Response&) { hit = "post items"; });
  router.get("/static/*",
             [&](const app::Request& r, app::Response&) { hit = std::string(r.path()); });
  app::Response res;
  router.handle(make_request("GET", "/items"), res);
  CHECK(hit == "get items");
  router.handle(make_request("POST", "/items?x"), res);
  CHECK(hit == "post items");
  router.handle(make_request("GET", "/static/css/a.css"), res);
  CHECK(hit == "/static/css/a.css");

  app::Response missing;
  router.handle(make_request("GET", "/nope"), missing);
  CHECK(missing.status == 404);
  app::Response wrong_method;
  router.handle(make_request("DELETE", "/items"), wrong_method);
  CHECK(wrong_method.status == 405);
  CHECK(wrong_method.header("Allow") == "GET, POST, HEAD"); // HEAD: served by GET
}

TEST_CASE("built-in apps") {
  CHECK(app::is_builtin_app("hello"));
  CHECK(app::make_builtin_app("nope") == nullptr);
  auto hello = app::make_hello_app();
  app::Response res;
  hello->handle(make_request("GET", "/"), res);
  CHECK(res.status == 200);
  CHECK(res.body == "OK");

  auto echo = app::make_echo_app();
  app::Request post = make_request("POST", "/e?q=1");
  post.set_body("payload");
  app::Response echoed;
  echo->handle(post, echoed);
  CHECK(echoed.body.find("method=POST\n") != std::string::npos);
  CHECK(echoed.body.find("param HTTP_X_REQUEST_ID=abc\n") != std::string::npos);
  CHECK(echoed.body.ends_with("\npayload"));
  app::Response thrown;
  CHECK_THROWS(echo->handle(make_request("GET", "/throw"), thrown));
}

TEST_CASE("router: the most specific path wins before the method decides") {
  app::Router router;
  std::string hit;
  router.any("/*", [&](const app::Request&, app::Response&) { hit = "catch-all"; });
  router.get("/only-get", [&](const app::Request&, app::Response&) { hit = "only-get"; });
  router.any("/api/*", [&](const app::Request&, app::Response&) { hit = "api"; });
  app::Response ok;
  router.handle(make_request("GET", "/only-get"), ok);
  CHECK(hit == "only-get");
  app::Response refused;
  hit.clear();
  router.handle(make_request("POST", "/only-get"), refused);
  CHECK(refused.status == 405);
  CHECK(hit.empty());
  router.handle(make_request("GET", "/api/v1"), ok);
  CHECK(hit == "api");
  router.handle(make_request("GET", "/else"), ok);
  CHECK(hit == "catch-all");
}
