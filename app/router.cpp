#include "app/router.hpp"

namespace app {

Router& Router::route(std::string method, std::string path, Function fn) {
  bool prefix = path.size() >= 2 && path.ends_with("/*");
  if (prefix) path.pop_back();
  routes_.push_back({std::move(method), std::move(path), prefix, std::move(fn)});
  return *this;
}

// The most specific path wins: an exact path before any prefix, a longer prefix before a
// shorter one. Only then does the method decide: a path served for other methods is a 405.
void Router::handle(const Request& request, Response& response) {
  std::string_view path = request.path();
  const Route* best = nullptr;
  for (const Route& r : routes_) {
    bool path_matches = r.prefix ? path.starts_with(r.path) : path == r.path;
    if (!path_matches) continue;
    if (!best || (best->prefix && (!r.prefix || r.path.size() > best->path.size()))) best = &r;
  }
  if (!best) {
    response.status = 404;
    response.set_content("Not Found\n", "text/plain");
    return;
  }
  std::string allow;
  for (const Route& r : routes_) {
    if (r.prefix != best->prefix || r.path != best->path) continue;
    if (r.method == "*" || r.method == request.method()) {
      r.fn(request, response);
      return;
    }
    if (!allow.empty()) allow += ", ";
    allow += r.method;
  }
  response.status = 405;
  response.set_header("Allow", allow);
  response.set_content("Method Not Allowed\n", "text/plain");
}

} // namespace app
