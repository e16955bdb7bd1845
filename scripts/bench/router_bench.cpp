// Router microbenchmark: 100 routes (50 static, 50 with parameters), nanoseconds per dispatch
// for the path of the first, a middle and the last route registered, a path with parameters,
// and a 404; the hello handler (no router) for reference. Each figure is the best of 5 runs
// of N dispatches, so that other load on the machine inflates it as little as possible.
//   router-bench [N]      (default 1 000 000)
#include "app/router.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

app::Request make(const std::string& method, const std::string& path) {
  app::Request r;
  r.add_param("REQUEST_METHOD", method);
  r.add_param("REQUEST_URI", path);
  r.add_param("QUERY_STRING", "");
  r.finish_params();
  return r;
}

double ns_per_call(app::Handler& handler, const app::Request& request, long n) {
  app::Response response;
  double best = 1e30;
  for (int run = 0; run < 5; ++run) {
    auto start = std::chrono::steady_clock::now();
    for (long i = 0; i < n; ++i) {
      response.reset(nullptr);
      handler.handle(request, response);
    }
    std::chrono::duration<double, std::nano> took = std::chrono::steady_clock::now() - start;
    best = std::min(best, took.count() / static_cast<double>(n));
  }
  return best;
}

class Hello : public app::Handler {
public:
  void handle(const app::Request&, app::Response& response) override {
    response.set_header("Content-Type", "text/plain");
    response.body.assign("OK");
  }
};

} // namespace

int main(int argc, char** argv) {
  long n = argc > 1 ? std::atol(argv[1]) : 1'000'000;
  app::Router router;
  auto ok = [](const app::Request&, app::Response& res) { res.body.assign("OK"); };
  for (int i = 0; i < 50; ++i) {
    std::string r = "/api/v1/resource" + std::to_string(i);
    router.get(r, ok);                            // static
    router.get(r + "/{id:int}/items/{item}", ok); // parameterised
  }
  // Registered first, 50th, 100th: the tree does not care, a list would.
  struct Case {
    const char* label;
    std::string path;
  } cases[] = {
      {"first route (static)", "/api/v1/resource0"},
      {"middle route (static)", "/api/v1/resource25"},
      {"last route (2 params)", "/api/v1/resource49/12345/items/abc"},
      {"middle route (2 params)", "/api/v1/resource25/7/items/x%20y"},
      {"404", "/api/v2/nothing/here"},
  };
  Hello hello;
  std::printf("%-28s %10s\n", "path", "ns/dispatch");
  std::printf("%-28s %10.1f\n", "hello handler (no router)",
              ns_per_call(hello, make("GET", "/"), n));
  for (const Case& c : cases)
    std::printf("%-28s %10.1f\n", c.label, ns_per_call(router, make("GET", c.path), n));
  return 0;
}
