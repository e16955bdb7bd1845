#pragma once
// app::Router: method + path pattern to a function, with hooks.
//
// Patterns are '/'-separated segments:
//   /users            a static segment, compared with the path as sent (still percent-encoded)
//   /users/{id}       a parameter: one non-empty segment, req.path_param("id"), percent-decoded
//   /users/{id:int}   a constrained parameter; constraints: int (optional '-', digits), uint
//                     (digits), hex, alpha (letters), alnum (letters, digits), slug (letters,
//                     digits, '-', '_')
//   /files/{path*}    a named catch-all tail, last segment only: everything after "/files/",
//                     decoded ("a/b.txt"; empty for "/files/")
//   /static/*         an unnamed tail: every path under "/static/"
//
// The most specific path wins, whatever the order of registration: at each segment a static
// segment beats a constrained parameter, which beats a plain parameter, which beats a tail; when
// a branch cannot match the rest of the path, the next one is tried. Only then does the method
// decide: a path with routes, none for this method, is a 405 with an Allow header. HEAD is
// answered by the GET route when there is no HEAD route: the GET's status and headers (with the
// Content-Length of the body it built), no body, also when the handler streams.
//
// Dispatch walks a segment tree built at registration: its cost grows with the number of
// segments of the path, not with the number of routes, and allocates nothing once the request's
// buffers have grown.
//
// Hooks: before() hooks run in order before the handler and may answer themselves by returning
// false (the chain stops; the response as they left it is sent); after() hooks run in reverse
// order after it, also after a short-circuit, a 404/405 or an error handler. Per-route hooks
// (Hooks argument) run inside the router's. An exception from a hook or handler goes to
// on_error(); without one, an app::HttpError becomes its status and message, and anything else
// is left to the host (a 500 and a log line; after() hooks do not run). Once the head went out
// (streaming), an exception is always rethrown: only the host can abort the response.
#include "app/handler.hpp"
#include "app/http_error.hpp"

#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace app {

// A route's own hooks (Router::Hooks), declared here so that a Router method can default it.
struct RouteHooks {
  // Returns false to stop the chain: the response as it stands is sent.
  std::vector<std::function<bool(const Request&, Response&)>> before = {};
  std::vector<std::function<void(const Request&, Response&)>> after = {};
};

class Router : public Handler {
public:
  using Function = std::function<void(const Request&, Response&)>;
  // Returns false to stop the chain: the response as it stands is sent.
  using Before = std::function<bool(const Request&, Response&)>;
  using After = std::function<void(const Request&, Response&)>;
  using ErrorHandler = std::function<void(const Request&, Response&, std::exception_ptr)>;
  using Hooks = RouteHooks;

  Router();
  ~Router() override;
  // Movable (routes live on the heap: Request::route() views stay valid), not copyable.
  Router(Router&&) noexcept;
  Router& operator=(Router&&) noexcept;
  Router(const Router&) = delete;
  Router& operator=(const Router&) = delete;

  // `method` "*" matches every method. Throws std::invalid_argument for a malformed pattern
  // (not starting with '/', an unknown constraint, a tail not last, a repeated parameter name, more
  // than 16 parameters) or a method and pattern registered twice.
  Router& route(std::string_view method, std::string_view pattern, Function fn, Hooks hooks = {});
  Router& get(std::string_view p, Function fn, Hooks h = {}) {
    return route("GET", p, std::move(fn), std::move(h));
  }
  Router& post(std::string_view p, Function fn, Hooks h = {}) {
    return route("POST", p, std::move(fn), std::move(h));
  }
  Router& put(std::string_view p, Function fn, Hooks h = {}) {
    return route("PUT", p, std::move(fn), std::move(h));
  }
  Router& patch(std::string_view p, Function fn, Hooks h = {}) {
    return route("PATCH", p, std::move(fn), std::move(h));
  }
  Router& del(std::string_view p, Function fn, Hooks h = {}) {
    return route("DELETE", p, std::move(fn), std::move(h));
  }
  Router& options(std::string_view p, Function fn, Hooks h = {}) {
    return route("OPTIONS", p, std::move(fn), std::move(h));
  }
  Router& any(std::string_view p, Function fn, Hooks h = {}) {
    return route("*", p, std::move(fn), std::move(h));
  }
  // A route whose handler reads the body as it arrives (Request::body_reader(); Handler::
  // streams_body): it runs as soon as the params are in, with bounded memory whatever the body's
  // size. Other routes get the body whole.
  Router& stream_route(std::string_view method, std::string_view pattern, Function fn,
                       Hooks hooks = {});
  Router& post_stream(std::string_view p, Function fn, Hooks h = {}) {
    return stream_route("POST", p, std::move(fn), std::move(h));
  }
  Router& put_stream(std::string_view p, Function fn, Hooks h = {}) {
    return stream_route("PUT", p, std::move(fn), std::move(h));
  }

  Router& before(Before hook);
  Router& after(After hook);
  // Replace the default "404 Not Found" / "405 Method Not Allowed" answers (the Allow header is
  // already set for the 405) and the error handling described above.
  Router& on_not_found(Function fn);
  Router& on_method_not_allowed(Function fn);
  Router& on_error(ErrorHandler fn);

  void handle(const Request& request, Response& response) override;
  // True when the route the request goes to is a stream_route().
  bool streams_body(const Request& request) const override;

private:
  struct Route;
  struct Node;
  struct Match;
  static bool match(const Node& node, std::string_view rest, Match& m);
  const Route* pick(const std::vector<const Route*>& endpoints, std::string_view method) const;
  void dispatch(const Request& request, Response& response, const Route* route,
                const std::string* allow);
  void fail(const Request& request, Response& response, std::exception_ptr error);

  std::unique_ptr<Node> root_;
  std::vector<std::unique_ptr<Route>> routes_;
  std::vector<Before> before_;
  std::vector<After> after_;
  Function not_found_, method_not_allowed_;
  ErrorHandler on_error_;
};

} // namespace app
