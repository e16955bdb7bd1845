// The handler of the consumer project: one route.
#pragma once
#include "app/router.hpp"

#include <string>

class Hello : public app::Router {
public:
  Hello() {
    get("/hello/{name}", [](const app::Request& req, app::Response& res) {
      res.set_content("hello " + std::string(req.path_param("name")) + "\n", "text/plain");
    });
  }
};
