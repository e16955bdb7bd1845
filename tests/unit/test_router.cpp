// app::Router: parameters, constraints, tails, precedence, HEAD, 404/405 and error handlers,
// middleware order and short-circuit, the route key for metrics.
#include "app/host_access.hpp"
#include "app/router.hpp"
#include "app/testing.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <stdexcept>
#include <string>

namespace {

app::Request make(std::string method, std::string uri) {
  app::Request r;
  r.add_param("REQUEST_METHOD", method);
  r.add_param("REQUEST_URI", uri);
  auto q = uri.find('?');
  r.add_param("QUERY_STRING", q == std::string::npos ? "" : uri.substr(q + 1));
  r.finish_params();
  return r;
}

// Dispatches and returns the body; the handlers below answer with what matched.
struct Probe {
  explicit Probe(app::Router& r) : router(r) {}
  app::Router& router;
  app::Response res;
  app::Request req;
  std::string operator()(std::string method, std::string uri) {
    req = make(method, uri);
    res = app::Response();
    router.handle(req, res);
    return res.body;
  }
};

app::Router::Function says(std::string what) {
  return [what](const app::Request&, app::Response& res) { res.body = what; };
}

} // namespace

TEST_CASE("router: named parameters, decoded, typed access") {
  app::Router router;
  router.get("/users/{id}", [](const app::Request& req, app::Response& res) {
    res.body = "user " + std::string(req.path_param("id"));
  });
  router.get("/users/{id}/posts/{post}", [](const app::Request& req, app::Response& res) {
    res.body = std::string(req.path_param("id")) + "/" + std::string(req.path_param("post"));
    CHECK(req.path_param("nope").empty());
  });
  router.get("/n/{v}", [](const app::Request& req, app::Response& res) {
    auto n = req.path_param_as<long>("v");
    res.body = n ? std::to_string(*n * 2) : "not a number";
  });
  Probe get{router};
  CHECK(get("GET", "/users/42") == "user 42");
  CHECK(get.req.route() == "GET /users/{id}");
  CHECK(get("GET", "/users/a%2Fb%20c?x=1") == "user a/b c");
  CHECK(get("GET", "/users/c++") == "user c++"); // '+' is a '+' in a path
  CHECK(get("GET", "/users/7/posts/9") == "7/9");
  CHECK(get("GET", "/n/21") == "42");
  CHECK(get("GET", "/n/21x") == "not a number");
  CHECK(get("GET", "/n/99999999999999999999999") == "not a number");
  get("GET", "/users/"); // a parameter is never empty
  CHECK(get.res.status == 404);
  CHECK(get.req.route() == "(no route)");
  get("GET", "/users//posts/1");
  CHECK(get.res.status == 404);
  get("GET", "/users/1/");
  CHECK(get.res.status == 404); // trailing slash: another path
}

TEST_CASE("router: constraints") {
  app::Router router;
  router.get("/i/{v:int}", says("int"));
  router.get("/i/{v:alpha}", says("alpha"));
  router.get("/i/{v}", says("any"));
  router.get("/u/{v:uint}", says("uint"));
  router.get("/h/{v:hex}", says("hex"));
  router.get("/s/{v:slug}", says("slug"));
  router.get("/a/{v:alnum}", says("alnum"));
  Probe get{router};
  CHECK(get("GET", "/i/-12") == "int");
  CHECK(get("GET", "/i/abc") == "alpha");
  CHECK(get("GET", "/i/a1") == "any");
  CHECK(get("GET", "/i/-") == "any");
  CHECK(get("GET", "/u/12") == "uint");
  get("GET", "/u/-12");
  CHECK(get.res.status == 404);
  CHECK(get("GET", "/h/0aF9") == "hex");
  CHECK(get("GET", "/s/my-post_1") == "slug");
  get("GET", "/s/a.b");
  CHECK(get.res.status == 404);
  CHECK(get("GET", "/a/x9") == "alnum");
  CHECK_THROWS_AS(router.get("/x/{v:float}", says("")), std::invalid_argument);
}

TEST_CASE("router: tails, named and unnamed") {
  app::Router router;
  router.get("/files/{path*}", [](const app::Request& req, app::Response& res) {
    res.body = "file:" + std::string(req.path_param("path"));
  });
  router.get("/static/*", says("static"));
  Probe get{router};
  CHECK(get("GET", "/files/a/b%20c.txt") == "file:a/b c.txt");
  CHECK(get("GET", "/files/") == "file:");
  CHECK(get.req.route() == "GET /files/{path*}");
  get("GET", "/files");
  CHECK(get.res.status == 404);
  CHECK(get("GET", "/static/css/x.css") == "static");
}

TEST_CASE("router: static beats parameter beats tail, in any registration order") {
  for (int order = 0; order < 2; ++order) {
    app::Router router;
    auto add_static = [&] { router.get("/a/new", says("static")); };
    auto add_param = [&] { router.get("/a/{id}", says("param")); };
    auto add_deep = [&] { router.get("/a/{id}/edit", says("deep param")); };
    auto add_tail = [&] { router.get("/a/*", says("tail")); };
    if (order == 0) {
      add_static(), add_param(), add_deep(), add_tail();
    } else {
      add_tail(), add_deep(), add_param(), add_static();
    }
    router.get("/a/new/x", says("static deep"));
    Probe get{router};
    CAPTURE(order);
    CHECK(get("GET", "/a/new") == "static");
    CHECK(get("GET", "/a/7") == "param");
    CHECK(get("GET", "/a/7/edit") == "deep param");
    CHECK(get("GET", "/a/new/edit") == "deep param"); // static branch fails, param is tried
    CHECK(get("GET", "/a/new/x") == "static deep");
    CHECK(get("GET", "/a/7/other") == "tail");
  }
}

TEST_CASE("router: method helpers, 405 with Allow, HEAD from GET") {
  app::Router router;
  router.get("/r", says("get"));
  router.post("/r", says("post"));
  router.put("/r", says("put"));
  router.patch("/r", says("patch"));
  router.del("/r", says("delete"));
  router.options("/r", says("options"));
  router.any("/any", [](const app::Request& req, app::Response& res) { res.body = req.method(); });
  Probe call{router};
  for (std::string m : {"GET", "POST", "PUT", "PATCH", "OPTIONS"}) {
    std::string lower = m;
    for (char& c : lower)
      c = static_cast<char>(std::tolower(c));
    CHECK(call(m, "/r") == lower);
  }
  CHECK(call("DELETE", "/r") == "delete");
  CHECK(call("BREW", "/any") == "BREW");
  call("TRACE", "/r");
  CHECK(call.res.status == 405);
  CHECK(call.res.header("Allow") == "GET, POST, PUT, PATCH, DELETE, OPTIONS, HEAD");
  CHECK(call.req.route() == "(method not allowed)");

  call("HEAD", "/r");
  CHECK(call.res.status == 200);
  CHECK(call.res.body.empty());
  CHECK(call.res.header("Content-Length") == "3");
  CHECK(call.req.route() == "GET /r");
  CHECK_THROWS_AS(router.get("/r", says("again")), std::invalid_argument);
}

TEST_CASE("router: HEAD on a streaming GET sends the head and no body bytes") {
  app::Router router;
  router.get("/stream", [](const app::Request&, app::Response& res) {
    res.set_header("Content-Type", "text/plain");
    CHECK(res.write("part one "));
    CHECK(res.write("part two"));
  });
  for (std::string method : {"GET", "HEAD"}) {
    app::testing::CaptureSink sink;
    app::Response res;
    res.reset(&sink);
    router.handle(make(method, "/stream"), res);
    CHECK(sink.heads_sent == 1);
    CHECK(sink.status == 200);
    CHECK(sink.body == (method == "GET" ? "part one part two" : ""));
  }
}

TEST_CASE("router: custom not-found, method-not-allowed and error handlers") {
  app::Router router;
  router.get("/ok", says("ok"));
  router.get("/boom", [](const app::Request&, app::Response&) { throw std::runtime_error("x"); });
  router.get("/teapot",
             [](const app::Request&, app::Response&) { throw app::HttpError(418, "no"); });
  router.get("/int", [](const app::Request&, app::Response&) { throw 7; });
  Probe call{router};
  call("GET", "/teapot");
  CHECK(call.res.status == 418);
  CHECK(call.res.body == "no\n");
  CHECK_THROWS_AS(call("GET", "/boom"), std::runtime_error); // default: left to the host

  router.on_not_found([](const app::Request& req, app::Response& res) {
    res.set_content("custom 404 for " + std::string(req.path()), "text/html");
  });
  router.on_method_not_allowed([](const app::Request&, app::Response& res) {
    res.body = "custom 405, allowed: " + std::string(res.header("Allow"));
  });
  router.on_error([](const app::Request&, app::Response& res, std::exception_ptr e) {
    res.status = 503;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& ex) {
      res.body = std::string("error: ") + ex.what();
    } catch (...) {
      res.body = "error: not a std::exception";
    }
  });
  CHECK(call("GET", "/nope") == "custom 404 for /nope");
  CHECK(call.res.status == 404);
  CHECK(call("POST", "/ok") == "custom 405, allowed: GET, HEAD");
  CHECK(call.res.status == 405);
  CHECK(call("GET", "/boom") == "error: x");
  CHECK(call.res.status == 503);
  CHECK(call("GET", "/int") == "error: not a std::exception");

  // After the head went out, the error is the host's to handle (it aborts the response).
  router.get("/late", [](const app::Request&, app::Response& res) {
    res.write("partial");
    throw std::runtime_error("late");
  });
  app::testing::CaptureSink sink;
  app::Response res;
  res.reset(&sink);
  CHECK_THROWS_AS(router.handle(make("GET", "/late"), res), std::runtime_error);
  CHECK(res.head_sent());
}

TEST_CASE("router: middleware order, short-circuit, per-route hooks, errors in hooks") {
  app::Router router;
  std::string log;
  router.before([&](const app::Request&, app::Response&) { return log += "b1 ", true; });
  router.before([&](const app::Request& req, app::Response& res) {
    log += "b2 ";
    if (req.query_arg("token") == "bad") {
      res.status = 401;
      res.body = "unauthorized";
      return false;
    }
    if (req.query_arg("token") == "throw") throw app::HttpError(403, "forbidden");
    return true;
  });
  router.after([&](const app::Request&, app::Response& res) {
    log += "a1 ";
    res.set_header("X-Request-Id", "r1");
  });
  router.after([&](const app::Request&, app::Response&) { log += "a2 "; });
  app::Router::Hooks admin;
  admin.before.push_back([&](const app::Request&, app::Response&) { return log += "rb ", true; });
  admin.after.push_back([&](const app::Request&, app::Response&) { log += "ra "; });
  router.get(
      "/admin",
      [&](const app::Request&, app::Response& res) {
        log += "handler ";
        res.body = "admin";
      },
      admin);

  Probe call{router};
  CHECK(call("GET", "/admin") == "admin");
  CHECK(log == "b1 b2 rb handler ra a2 a1 ");
  CHECK(call.res.header("X-Request-Id") == "r1");

  log.clear();
  CHECK(call("GET", "/admin?token=bad") == "unauthorized");
  CHECK(call.res.status == 401);
  CHECK(log == "b1 b2 ra a2 a1 "); // the handler and the later befores skipped; afters run

  log.clear();
  call("GET", "/admin?token=throw");
  CHECK(call.res.status == 403);
  CHECK(log == "b1 b2 ra a2 a1 ");

  log.clear();
  call("GET", "/missing");
  CHECK(call.res.status == 404);
  CHECK(log == "b1 b2 a2 a1 ");
}

TEST_CASE("router: malformed patterns are refused at registration") {
  app::Router router;
  CHECK_THROWS_AS(router.get("no-slash", says("")), std::invalid_argument);
  CHECK_THROWS_AS(router.get("/a/*/b", says("")), std::invalid_argument);
  CHECK_THROWS_AS(router.get("/a/{x}/{x}", says("")), std::invalid_argument);
  CHECK_THROWS_AS(router.get("/a/{}", says("")), std::invalid_argument);
  CHECK_THROWS_AS(router.get("/a/b{c", says("")), std::invalid_argument);
  std::string many = "";
  for (int i = 0; i < 17; ++i)
    many += "/{p" + std::to_string(i) + "}";
  CHECK_THROWS_AS(router.get(many, says("")), std::invalid_argument);
}

TEST_CASE("router: per-route hooks with designated initializers, as the README shows") {
  app::Router router;
  auto require_login = [](const app::Request& req, app::Response& res) {
    if (!req.cookie("sid").empty()) return true;
    res.redirect("/login", 303);
    return false;
  };
  router.get("/admin", says("admin page"), {.before = {require_login}});
  Probe get{router};
  get("GET", "/admin");
  CHECK(get.res.status == 303);
  CHECK(get.res.header("Location") == "/login");
}

TEST_CASE("router: a moved router keeps its routes") {
  auto make_router = [] {
    app::Router r;
    r.get("/x/{id}", says("x"));
    return r;
  };
  app::Router router = make_router();
  Probe get{router};
  CHECK(get("GET", "/x/1") == "x");
  CHECK(get.req.route() == "GET /x/{id}");
}

TEST_CASE("a handler that is not a Router is one route") {
  app::Request r = make("GET", "/anything");
  CHECK(r.route() == "(handler)");
}

TEST_CASE("router: a stream route says it reads its body as it arrives, others do not") {
  app::Router r;
  r.post_stream("/up/{name}", says("streamed"));
  r.post("/whole", says("whole"));
  r.get("/up/{name}", says("get"));
  CHECK(r.streams_body(make("POST", "/up/a")));
  CHECK_FALSE(r.streams_body(make("GET", "/up/a")));
  CHECK_FALSE(r.streams_body(make("POST", "/whole")));
  CHECK_FALSE(r.streams_body(make("POST", "/nowhere")));
  Probe probe(r);
  CHECK(probe("POST", "/up/a") == "streamed"); // dispatched as any route
}

TEST_CASE("request: body_reader() reads a whole body in pieces, from its start, every time") {
  app::Request req = make("POST", "/x");
  req.set_body("0123456789");
  char piece[4];
  std::string got;
  for (std::size_t n; (n = req.body_reader().read(piece, sizeof piece)) > 0;)
    got.append(piece, n);
  CHECK(got == "0123456789");
  CHECK_FALSE(req.body_streamed());
  req.set_body("abc");
  std::string again;
  req.body_reader().read_all(again);
  CHECK(again == "abc");
}

TEST_CASE("request: a streamed body is the stored start, then the stream, body() reads it all") {
  struct Rest : app::BodyReader {
    std::string left = "DEFGHIJ";
    std::size_t read(char* out, std::size_t size) override {
      const std::size_t n = std::min(size, left.size());
      left.copy(out, n);
      left.erase(0, n);
      return n;
    }
  } rest;
  app::Request req = make("POST", "/x");
  req.set_body("ABC");
  app::HostAccess::set_body_stream(req, &rest);
  CHECK(req.body_streamed());
  CHECK(req.body() == "ABCDEFGHIJ");
  req.clear();
  CHECK_FALSE(req.body_streamed());
}
