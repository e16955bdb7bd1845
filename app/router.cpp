#include "app/router.hpp"

namespace app {

Router& Router::route(std::string method, std::string path, Function fn) {
  bool prefix = path.size() >= 2 && path.ends_with("/*");
  if (prefix) path.pop_back();
  routes_.push_back({std::move(method), std::move(path), prefix, std::move(fn)});
  return *this;
}

void Router::handle(const Request& request, Response& response) {
  std::string_view path = request.path();
  std::string allow;
  for (const Route& r : routes_) {
    bool path_matches = r.prefix ? path.starts_with(r.path) : path == r.path;
    if (!path_matches) continue;
    if (r.method == "*" || r.method == request.method()) {
      r.fn(request, response);
      return;
    }
    if (!allow.empty()) allow += ", ";
    allow += r.method;
  }
  if (allow.empty()) {
    response.status = 404;
    response.set_content("Not Found\n", "text/plain");
  } else {
    response.status = 405;
    response.set_header("Allow", allow);
    response.set_content("Method Not Allowed\n", "text/plain");
  }
}

} // namespace app
