#pragma once
// A tiny router: method + path to a function. A path ending in "/*" matches every path under it.
// No route for the path: 404; routes for the path but not that method: 405 with an Allow header.
#include "app/handler.hpp"

#include <functional>
#include <string>
#include <vector>

namespace app {

class Router : public Handler {
public:
  using Function = std::function<void(const Request&, Response&)>;

  // `method` "*" matches every method.
  Router& route(std::string method, std::string path, Function fn);
  Router& get(std::string path, Function fn) {
    return route("GET", std::move(path), std::move(fn));
  }
  Router& post(std::string path, Function fn) {
    return route("POST", std::move(path), std::move(fn));
  }
  Router& any(std::string path, Function fn) { return route("*", std::move(path), std::move(fn)); }

  void handle(const Request& request, Response& response) override;

private:
  struct Route {
    std::string method;
    std::string path; // without the trailing "*" when prefix
    bool prefix;
    Function fn;
  };
  std::vector<Route> routes_;
};

} // namespace app
