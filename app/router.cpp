#include "app/router.hpp"

#include "app/url_encoding.hpp"

#include <algorithm>
#include <charconv>
#include <stdexcept>
#include <unordered_map>

namespace app {
namespace {

constexpr std::size_t kMaxParams = 16;

enum class Constraint { Uint, Int, Hex, Alpha, Alnum, Slug, None }; // most to least specific

Constraint parse_constraint(std::string_view name, std::string_view pattern) {
  if (name.empty()) return Constraint::None;
  if (name == "int") return Constraint::Int;
  if (name == "uint") return Constraint::Uint;
  if (name == "hex") return Constraint::Hex;
  if (name == "alpha") return Constraint::Alpha;
  if (name == "alnum") return Constraint::Alnum;
  if (name == "slug") return Constraint::Slug;
  throw std::invalid_argument("route pattern " + std::string(pattern) + ": unknown constraint '" +
                              std::string(name) + "' (int, uint, hex, alpha, alnum, slug)");
}

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_alpha(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

bool satisfies(Constraint c, std::string_view s) {
  auto all = [&](auto pred) { return std::all_of(s.begin(), s.end(), pred); };
  switch (c) {
  case Constraint::Int:
    if (!s.empty() && s.front() == '-') s.remove_prefix(1);
    return !s.empty() && all(is_digit);
  case Constraint::Uint:
    return all(is_digit);
  case Constraint::Hex:
    return all([](char ch) {
      return is_digit(ch) || (ch >= 'a' && ch <= 'f') || (ch >= 'A' && ch <= 'F');
    });
  case Constraint::Alpha:
    return all(is_alpha);
  case Constraint::Alnum:
    return all([](char ch) { return is_alpha(ch) || is_digit(ch); });
  case Constraint::Slug:
    return all([](char ch) { return is_alpha(ch) || is_digit(ch) || ch == '-' || ch == '_'; });
  case Constraint::None:
    return true;
  }
  return false;
}

} // namespace

struct Router::Route {
  std::string method;
  std::string key; // "GET /users/{id}": Request::route()
  Function fn;
  Hooks hooks;
  std::vector<std::string> param_names; // in segment order
  std::string tail_name;                // empty for "*" or no tail
  bool streams_body = false;            // stream_route(): the body is read as it arrives
};

struct Router::Node {
  struct ParamChild {
    Constraint constraint;
    std::unique_ptr<Node> node;
  };
  // Looked up by string_view without building a string (transparent hash and equality).
  struct Hash {
    using is_transparent = void;
    std::size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, std::unique_ptr<Node>, Hash, std::equal_to<>> statics;
  std::vector<ParamChild> params;       // most specific first
  std::vector<const Route*> here, tail; // routes ending here / with a tail after this node
  std::string here_allow, tail_allow;   // their Allow header

  Node* static_child(std::string_view segment) const {
    if (statics.empty()) return nullptr; // spares the hash below parameters
    auto it = statics.find(segment);
    return it != statics.end() ? it->second.get() : nullptr;
  }
};

struct Router::Match {
  const Node* node = nullptr;
  bool tail = false;
  std::string_view tail_value;
  std::size_t count = 0;
  std::string_view captures[kMaxParams];
};

Router::Router() : root_(std::make_unique<Node>()) {}
Router::~Router() = default;
Router::Router(Router&&) noexcept = default;
Router& Router::operator=(Router&&) noexcept = default;

Router& Router::route(std::string_view method, std::string_view pattern, Function fn, Hooks hooks) {
  if (!pattern.starts_with('/'))
    throw std::invalid_argument("route pattern must start with '/': " + std::string(pattern));
  auto route = std::make_unique<Route>();
  route->method = method;
  route->key =
      (method == "*" ? std::string("ANY") : std::string(method)) + " " + std::string(pattern);
  route->fn = std::move(fn);
  route->hooks = std::move(hooks);

  Node* node = root_.get();
  bool tail = false;
  std::string_view rest = pattern.substr(1);
  for (bool last = false; !last;) {
    std::size_t slash = rest.find('/');
    last = slash == std::string_view::npos;
    std::string_view segment = rest.substr(0, slash);
    rest.remove_prefix(last ? rest.size() : slash + 1);
    auto bad = [&](const char* why) {
      return std::invalid_argument("route pattern " + std::string(pattern) + ": " + why);
    };
    if (segment == "*" || (segment.starts_with('{') && segment.ends_with("*}"))) {
      if (!last) throw bad("a tail (* or {name*}) must be the last segment");
      if (segment != "*") route->tail_name = segment.substr(1, segment.size() - 3);
      tail = true;
      break;
    }
    if (segment.starts_with('{') && segment.ends_with('}')) {
      std::string_view inner = segment.substr(1, segment.size() - 2);
      std::size_t colon = inner.find(':');
      std::string name(inner.substr(0, colon));
      Constraint c = parse_constraint(
          colon == std::string_view::npos ? std::string_view{} : inner.substr(colon + 1), pattern);
      if (name.empty()) throw bad("a parameter without a name");
      if (std::find(route->param_names.begin(), route->param_names.end(), name) !=
          route->param_names.end())
        throw bad("a parameter name used twice");
      if (route->param_names.size() == kMaxParams) throw bad("more than 16 parameters");
      route->param_names.push_back(std::move(name));
      auto it = std::find_if(node->params.begin(), node->params.end(),
                             [c](const Node::ParamChild& p) { return p.constraint >= c; });
      if (it == node->params.end() || it->constraint != c)
        it = node->params.insert(it, {c, std::make_unique<Node>()});
      node = it->node.get();
      continue;
    }
    if (segment.find_first_of("{}") != std::string_view::npos)
      throw bad("'{' or '}' inside a static segment");
    Node* child = node->static_child(segment);
    if (!child) {
      child = node->statics.emplace(segment, std::make_unique<Node>()).first->second.get();
    }
    node = child;
  }
  if (!route->tail_name.empty() && std::find(route->param_names.begin(), route->param_names.end(),
                                             route->tail_name) != route->param_names.end())
    throw std::invalid_argument("route pattern " + std::string(pattern) +
                                ": a parameter name used twice");

  std::vector<const Route*>& endpoints = tail ? node->tail : node->here;
  for (const Route* r : endpoints)
    if (r->method == route->method)
      throw std::invalid_argument("route registered twice: " + route->key);
  endpoints.push_back(route.get());
  std::string& allow = tail ? node->tail_allow : node->here_allow;
  allow.clear();
  bool get = false, head = false;
  for (const Route* r : endpoints) {
    if (r->method == "*") continue;
    get = get || r->method == "GET";
    head = head || r->method == "HEAD";
    allow += (allow.empty() ? "" : ", ") + r->method;
  }
  if (get && !head) allow += ", HEAD";
  routes_.push_back(std::move(route));
  return *this;
}

Router& Router::before(Before hook) {
  before_.push_back(std::move(hook));
  return *this;
}
Router& Router::after(After hook) {
  after_.push_back(std::move(hook));
  return *this;
}
Router& Router::on_not_found(Function fn) {
  not_found_ = std::move(fn);
  return *this;
}
Router& Router::on_method_not_allowed(Function fn) {
  method_not_allowed_ = std::move(fn);
  return *this;
}
Router& Router::on_error(ErrorHandler fn) {
  on_error_ = std::move(fn);
  return *this;
}

// `rest` is the part of the path not matched yet: empty, or '/' and more. Depth-first in order of
// specificity: the first complete match is the most specific one.
bool Router::match(const Node& node, std::string_view rest, Match& m) {
  if (rest.empty()) {
    if (node.here.empty()) return false;
    m.node = &node;
    m.tail = false;
    return true;
  }
  std::size_t end = rest.find('/', 1);
  std::string_view segment = rest.substr(1, end == std::string_view::npos ? end : end - 1);
  std::string_view after = end == std::string_view::npos ? std::string_view{} : rest.substr(end);
  if (const Node* child = node.static_child(segment); child && match(*child, after, m)) return true;
  if (!segment.empty() && m.count < kMaxParams)
    for (const Node::ParamChild& p : node.params) {
      if (!satisfies(p.constraint, segment)) continue;
      m.captures[m.count++] = segment;
      if (match(*p.node, after, m)) return true;
      --m.count;
    }
  if (node.tail.empty()) return false;
  m.node = &node;
  m.tail = true;
  m.tail_value = rest.substr(1);
  return true;
}

const Router::Route* Router::pick(const std::vector<const Route*>& endpoints,
                                  std::string_view method) const {
  const Route *get = nullptr, *any = nullptr;
  for (const Route* r : endpoints) {
    if (r->method == method) return r;
    if (r->method == "GET") get = r;
    if (r->method == "*") any = r;
  }
  return method == "HEAD" && get ? get : any;
}

Router& Router::stream_route(std::string_view method, std::string_view pattern, Function fn,
                             Hooks hooks) {
  route(method, pattern, std::move(fn), std::move(hooks));
  routes_.back()->streams_body = true;
  return *this;
}

bool Router::streams_body(const Request& request) const {
  Match m;
  std::string_view path = request.path();
  if (!path.starts_with('/') || !match(*root_, path, m)) return false;
  const Route* route = pick(m.tail ? m.node->tail : m.node->here, request.method());
  return route && route->streams_body;
}

void Router::handle(const Request& request, Response& response) {
  std::string_view path = request.path(), method = request.method();
  request.path_params_.clear();
  request.decoded_params_.clear();
  bool head = method == "HEAD";
  if (head) response.set_head_only(true);

  Match m;
  const Route* route = nullptr;
  const std::string* allow = nullptr;
  if (path.starts_with('/') && match(*root_, path, m)) {
    route = pick(m.tail ? m.node->tail : m.node->here, method);
    if (!route) allow = m.tail ? &m.node->tail_allow : &m.node->here_allow;
  }
  if (route) {
    request.route_ = route->key;
    // Decoded values never outgrow the path: reserving it keeps the views below valid.
    request.decoded_params_.reserve(path.size());
    auto value = [&request](std::string_view raw) {
      if (raw.find('%') == std::string_view::npos) return raw;
      std::size_t start = request.decoded_params_.size();
      percent_decode(raw, false, request.decoded_params_);
      return std::string_view(request.decoded_params_).substr(start);
    };
    for (std::size_t i = 0; i < route->param_names.size(); ++i)
      request.path_params_.push_back({route->param_names[i], value(m.captures[i])});
    if (!route->tail_name.empty())
      request.path_params_.push_back({route->tail_name, value(m.tail_value)});
  } else {
    request.route_ = allow ? "(method not allowed)" : "(no route)";
  }

  dispatch(request, response, route, allow);

  // HEAD from a buffered GET: its Content-Length, without the body.
  if (head && !response.head_sent() && !response.body.empty()) {
    if (response.header("Content-Length").empty())
      response.set_header("Content-Length", std::to_string(response.body.size()));
    response.body.clear();
  }
}

void Router::dispatch(const Request& request, Response& response, const Route* route,
                      const std::string* allow) {
  try {
    bool go = true;
    for (std::size_t i = 0; go && i < before_.size(); ++i)
      go = before_[i](request, response);
    if (route)
      for (std::size_t i = 0; go && i < route->hooks.before.size(); ++i)
        go = route->hooks.before[i](request, response);
    if (go) {
      if (route) {
        route->fn(request, response);
      } else if (allow) {
        response.status = 405;
        response.set_header("Allow", *allow);
        if (method_not_allowed_)
          method_not_allowed_(request, response);
        else
          response.set_content("Method Not Allowed\n", "text/plain");
      } else {
        response.status = 404;
        if (not_found_)
          not_found_(request, response);
        else
          response.set_content("Not Found\n", "text/plain");
      }
    }
  } catch (...) {
    fail(request, response, std::current_exception());
  }
  if (route)
    for (auto it = route->hooks.after.rbegin(); it != route->hooks.after.rend(); ++it)
      (*it)(request, response);
  for (auto it = after_.rbegin(); it != after_.rend(); ++it)
    (*it)(request, response);
}

void Router::fail(const Request& request, Response& response, std::exception_ptr error) {
  if (response.head_sent()) std::rethrow_exception(error);
  response.clear();
  if (on_error_) {
    on_error_(request, response, error);
    return;
  }
  try {
    std::rethrow_exception(error);
  } catch (const HttpError& e) {
    response.status = e.status();
    response.set_content(std::string(e.what()) + "\n", "text/plain");
  }
}

} // namespace app
