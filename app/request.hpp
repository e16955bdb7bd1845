#pragma once
// app::Request: one FastCGI request as plain values. The host copies it out of libfcgi (which
// frees its buffers at the end of each request) into storage it reuses from request to request,
// so a steady stream of requests allocates nothing here once the buffers have grown.
#include <cstddef>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace app {

class Request {
public:
  struct Param {
    std::string_view name;
    std::string_view value;
  };

  std::string_view method() const { return view(method_); }
  // REQUEST_URI as the web server sent it: path and query.
  std::string_view uri() const { return view(uri_); }
  // The path part of the URI (before '?'), still percent-encoded.
  std::string_view path() const { return view(path_); }
  // QUERY_STRING, without the '?'.
  std::string_view query() const { return view(query_); }
  const std::string& body() const { return body_; }

  // A FastCGI parameter (CGI variable) by exact name; empty when absent. When a name was sent
  // twice, the last value wins, as in PHP.
  std::string_view param(std::string_view name) const;
  bool has_param(std::string_view name) const;
  std::size_t param_count() const { return entries_.size(); }
  Param param_at(std::size_t i) const;

  // An HTTP request header by its HTTP name ("Content-Type", "x-request-id": case and '-' vs
  // '_' do not matter), taken from the HTTP_* parameters and CONTENT_TYPE/CONTENT_LENGTH.
  std::string_view header(std::string_view name) const;
  // Calls fn(name, value) for every HTTP_* parameter, with the name as sent ("HTTP_USER_AGENT").
  void for_each_header(const std::function<void(std::string_view, std::string_view)>& fn) const;

  // The value of one query-string argument ("a" in "a=1&b=2"), not percent-decoded; empty when
  // absent.
  std::string_view query_arg(std::string_view name) const;

  // True once the web server has given up on this request (FCGI_ABORT_REQUEST, or the
  // connection closed). Asking costs one non-blocking read; handlers doing long work may poll it.
  bool aborted() const { return abort_probe_ && abort_probe_(abort_context_); }

  // Builder interface, used by the host (and by tests that call a handler directly).
  void clear();
  void add_param(std::string_view name, std::string_view value);
  void set_body(std::string_view body) { body_.assign(body); }
  std::string& mutable_body() { return body_; }
  // Derives method, uri, path and query from the parameters added so far.
  void finish_params();
  // A plain function and context rather than std::function: set once per request, never allocates.
  void set_abort_probe(bool (*probe)(void*), void* context) {
    abort_probe_ = probe;
    abort_context_ = context;
  }

private:
  struct Span {
    std::size_t offset = 0;
    std::size_t size = 0;
  };
  struct Entry {
    Span name;
    Span value;
  };
  std::string_view view(Span s) const { return {storage_.data() + s.offset, s.size}; }
  Span store(std::string_view text);
  const Entry* find(std::string_view name) const;

  std::string storage_;        // all names and values, back to back
  std::vector<Entry> entries_; // in arrival order
  Span method_, uri_, path_, query_;
  std::string body_;
  bool (*abort_probe_)(void*) = nullptr;
  void* abort_context_ = nullptr;
};

} // namespace app
