#pragma once
// app::Request: one FastCGI request as plain values.
//
// Lifetime: the params (and so method(), uri(), path(), query(), param(), header()...) are views
// into the host's connection buffer, valid while the handler runs and not after: the next
// request on the connection overwrites them. A handler that keeps any of it past its request
// (in a cache, a queue, another thread) copies it first: std::string(request.param("X")). The
// body is held by the request (in memory reused from request to request, or a temporary file),
// so a steady stream of requests neither copies the params nor allocates here once the buffers
// have grown.
#include "app/args.hpp"
#include "app/multipart.hpp"
#include "app/spill_buffer.hpp"
#include "app/wire_param.hpp"

#include <charconv>
#include <cstddef>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace app {

class Router;

class Request {
public:
  struct Param {
    std::string_view name;
    std::string_view value;
  };

  std::string_view method() const { return method_; }
  // REQUEST_URI as the web server sent it: path and query.
  std::string_view uri() const { return uri_; }
  // The path part of the URI (before '?'), still percent-encoded.
  std::string_view path() const { return path_; }
  // QUERY_STRING, without the '?', still percent-encoded.
  std::string_view query() const { return query_; }

  // The request body. Bodies above the spill threshold (default 1 MiB, set by the host:
  // --spill-threshold) are not held in memory but in an unlinked temporary file: read them in
  // pieces with read_body(). body() works for every body, but on a spilled one it reads the
  // whole file into memory on its first call (kept until the next request): handlers that take
  // large uploads use read_body() or multipart() instead.
  const std::string& body() const;
  std::size_t body_size() const { return body_.size(); }
  bool body_spilled() const { return body_.spilled(); }
  // Copies up to `size` body bytes from `offset` into `out`; returns how many (0 at the end).
  std::size_t read_body(std::size_t offset, char* out, std::size_t size) const {
    return body_.read(offset, out, size);
  }

  // A FastCGI parameter (CGI variable) by exact name; empty when absent. When a name was sent
  // twice, the last value wins, as in PHP.
  std::string_view param(std::string_view name) const;
  bool has_param(std::string_view name) const;
  std::size_t param_count() const { return entries_.size() + wire_size(); }
  Param param_at(std::size_t i) const;

  // An HTTP request header by its HTTP name ("Content-Type", "x-request-id": case and '-' vs
  // '_' do not matter), taken from the HTTP_* parameters and CONTENT_TYPE/CONTENT_LENGTH.
  std::string_view header(std::string_view name) const;
  // Calls fn(name, value) for every HTTP_* parameter, with the name as sent ("HTTP_USER_AGENT").
  void for_each_header(const std::function<void(std::string_view, std::string_view)>& fn) const;

  // Query-string arguments, percent- and '+'-decoded (app/url_encoding.hpp says how malformed
  // escapes are kept). query_arg() is the first value of a name, empty when absent;
  // query_args(name) every value ("x=1&x=2"); query_args() all pairs in order. Parsed on first
  // use, into storage reused from request to request.
  std::string_view query_arg(std::string_view name) const { return query_args().get(name); }
  std::vector<std::string_view> query_args(std::string_view name) const {
    return query_args().get_all(name);
  }
  const Args& query_args() const;
  // The same for an application/x-www-form-urlencoded body (empty for other content types).
  std::string_view form_arg(std::string_view name) const { return form_args().get(name); }
  std::vector<std::string_view> form_args(std::string_view name) const {
    return form_args().get_all(name);
  }
  const Args& form_args() const;

  // The value of a cookie from the Cookie header, as sent (app/cookies.hpp: first of duplicates
  // wins, quotes dropped, malformed pairs skipped); empty when absent.
  std::string_view cookie(std::string_view name) const;
  bool has_cookie(std::string_view name) const;

  // The parts of a multipart/form-data body (empty for other content types), parsed on first use;
  // parts larger than the spill threshold are in temporary files (MultipartPart::data). A
  // malformed body throws HttpError(400). part() is the first part of that field name, or null.
  const std::vector<MultipartPart>& multipart() const;
  const MultipartPart* part(std::string_view name) const;

  // A path parameter captured by the Router ("id" of "/users/{id}"), percent-decoded; empty when
  // the route has no such parameter.
  std::string_view path_param(std::string_view name) const;
  // The same converted to a number (from_chars: the whole value must be one); nullopt when absent
  // or not a number of that type.
  template <class T> std::optional<T> path_param_as(std::string_view name) const {
    static_assert(std::is_arithmetic_v<T>, "path_param_as<T>: T must be a number type");
    std::string_view text = path_param(name);
    T value{};
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
    return value;
  }

  // The route that took this request, for metrics and logs: its method and pattern
  // ("GET /users/{id}") when a Router matched, "(no route)" for a 404 and "(method not allowed)"
  // for a 405 of a Router, "(handler)" for a handler that is not a Router. The text lives as long
  // as the Router (or forever), not only as long as the request.
  std::string_view route() const { return route_; }

  // The request's id, for log lines and traces: the X-Request-Id header as the web server sent it
  // (nginx: `fastcgi_param HTTP_X_REQUEST_ID $request_id;`), else the trace id of a valid
  // traceparent header, else one the host made up (32 hex digits, unique per worker and
  // request; formatted on the first call, nothing is spent on it otherwise). Empty when no host
  // numbered the request (a handler called directly by a test).
  std::string_view request_id() const;
  // The W3C traceparent header ("00-<trace id>-<parent id>-<flags>") as sent; empty when absent.
  std::string_view trace_parent() const { return traceparent_; }
  // The 32 hex digits of the trace id of a well-formed traceparent; empty otherwise.
  std::string_view trace_id() const;
  // The id the request carried (X-Request-Id, else the trace id); empty when it carried none.
  std::string_view carried_id() const;
  // X-Request-Start as the web server stamped it (nginx: `fastcgi_param HTTP_X_REQUEST_START
  // "t=${msec}";`), empty when absent: the host's queue-time measure reads it on every request.
  std::string_view request_start() const { return request_start_; }

  // True once the web server has given up on this request (FCGI_ABORT_REQUEST, or the
  // connection closed). Asking costs one non-blocking read; handlers doing long work may poll it.
  bool aborted() const { return abort_probe_ && abort_probe_(abort_context_); }

  // Builder interface, used by the host (and by tests that call a handler directly).
  void clear();
  // After a request: closes a spilled body's temporary file, and frees the buffers that grew to
  // `above` bytes or more (a worker would otherwise keep the largest request's memory). Cheap
  // when nothing is large. True when something was released.
  bool release_large_buffers(std::size_t above);
  // A param copied into the request's own storage (tests, handlers called directly).
  void add_param(std::string_view name, std::string_view value);
  // A param as views into memory that outlives the request (the host's connection buffer): no
  // copy. Both kinds can be mixed.
  void add_param_view(std::string_view name, std::string_view value) {
    entries_.push_back({name, value});
  }
  // Body filling: expect_body() (optional, the announced size), append_body() as the bytes come,
  // finish_body() at the end. set_body() does all three (tests).
  void set_spill_threshold(std::size_t bytes) { body_.set_threshold(bytes); }
  std::size_t spill_threshold() const { return body_.threshold(); }
  void expect_body(std::size_t size) { body_.expect(size); }
  void append_body(const char* data, std::size_t size) { body_.append(data, size); }
  void finish_body() {}
  void set_body(std::string_view body);
  // Derives method, uri, path and query (and the ids) from the parameters added so far.
  void finish_params();

private:
  friend class Router;
  // The host's hooks (app/host_access.hpp): not part of the handler API.
  friend struct HostAccess;
  // The params as the host found them on the wire, read in place: `count` params at `params`,
  // over the bytes at `base`, both valid while the request is served (a view per param, made
  // for every request, cost more than most handlers spend on their params). `skip`, 1 + an
  // index, leaves that one out (0: none). They come after the params added before this call
  // and before those added after it; one run per request.
  void set_wire_params(const char* base, const WireParam* params, std::size_t count,
                       std::size_t skip = 0) {
    wire_base_ = base;
    wire_ = params;
    wire_count_ = count;
    wire_skip_ = skip;
    wire_at_ = entries_.size();
  }
  // finish_params() from what the caller found already (the host, in its one pass over the params
  // on the wire): each the last value of its param, empty when absent.
  struct CoreParams {
    std::string_view method, uri, query, script_name, request_id, traceparent, request_start;
  };
  void finish_params(const CoreParams& core);
  // A plain function and context rather than std::function: set once per request, never allocates.
  void set_abort_probe(bool (*probe)(void*), void* context) {
    abort_probe_ = probe;
    abort_context_ = context;
  }
  // The id request_id() makes up when the request carries none: `format(context, out)` writes
  // exactly 32 characters; called at most once per request, and only when someone asks.
  void set_id_source(void (*format)(const void* context, char* out), const void* context) {
    id_format_ = format;
    id_context_ = context;
  }
  struct PathParam {
    std::string_view name;  // in the Router's storage
    std::string_view value; // in path_'s memory or decoded_params_
  };

  // The last param, in the order sent, for which pred(param) holds.
  template <class Pred> std::optional<Param> last_param(Pred pred) const {
    for (std::size_t i = param_count(); i-- > 0;)
      if (Param p = param_at(i); pred(p)) return p;
    return std::nullopt;
  }
  std::size_t wire_size() const { return wire_count_ - (wire_skip_ != 0); }
  Param wire_param(std::size_t i) const {
    const WireParam& w = wire_[wire_skip_ != 0 && i >= wire_skip_ - 1 ? i + 1 : i];
    const char* name = wire_base_ + w.at;
    return {{name, w.name_size}, {name + w.name_size, w.value_size}};
  }

  std::deque<std::string> owned_; // the copies of add_param (a deque: they never move)
  std::vector<Param> entries_;    // in arrival order, but for the wire params
  // set_wire_params(): read in place, after entries_[0, wire_at_).
  const char* wire_base_ = nullptr;
  const WireParam* wire_ = nullptr;
  std::size_t wire_count_ = 0, wire_skip_ = 0, wire_at_ = 0;
  std::string_view method_, uri_, path_, query_;
  std::string_view request_id_, traceparent_; // HTTP_X_REQUEST_ID, HTTP_TRACEPARENT (the last)
  std::string_view request_start_;            // HTTP_X_REQUEST_START (the last)
  SpillBuffer body_;
  bool (*abort_probe_)(void*) = nullptr;
  void* abort_context_ = nullptr;
  void (*id_format_)(const void*, char*) = nullptr;
  const void* id_context_ = nullptr;
  mutable char generated_id_[32]{};
  mutable bool id_generated_ = false;

  // Parsed on demand (the handler API takes a const Request): reset by clear().
  mutable std::string loaded_body_; // a spilled body once body() read it
  mutable bool body_loaded_ = false;
  mutable Args query_args_, form_args_;
  mutable bool query_parsed_ = false, form_parsed_ = false;
  mutable std::vector<MultipartPart> parts_;
  mutable bool parts_parsed_ = false;
  // Set by the Router that dispatches the request.
  mutable std::vector<PathParam> path_params_;
  mutable std::string decoded_params_;
  mutable std::string_view route_ = "(handler)";
};

} // namespace app
