// A program with its own handler and main: every fcgi-host option works, e.g.
//   ./greeter --listen unix:/run/greeter.sock --workers 4
#include "app/router.hpp"
#include "fcgi_host/run.hpp"

#include <string>

int main(int argc, char** argv) {
  app::Router router;
  router.get("/hello", [](const app::Request& req, app::Response& res) {
    std::string name(req.query_arg("name"));
    res.set_content("Hello, " + (name.empty() ? std::string("world") : name) + "!\n", "text/plain");
  });
  router.post("/echo", [](const app::Request& req, app::Response& res) {
    res.set_content(req.body(), std::string(req.header("Content-Type")));
  });
  return fcgi_host::run(argc, argv, router);
}
