#pragma once
// The CGI variables the host itself reads, each as one value: the body's framing
// (CONTENT_LENGTH), the request line the router and the metrics see (REQUEST_METHOD,
// REQUEST_URI, QUERY_STRING, SCRIPT_NAME as REQUEST_URI's stand-in, CONTENT_TYPE for forms and
// multipart), the status page's allow-list (REMOTE_ADDR) and queue-time shedding's arrival stamp
// (HTTP_X_REQUEST_START). A front server that sends one of them twice with two values leaves the
// host and the handler to guess which one the web server acted on, as two Content-Length
// headers do in HTTP (RFC 9112, 6.3): the record guard answers 400. The same value twice is one
// value, and the handler sees it once.
//
// Not here: the HTTP_* headers the host only passes on (Accept, Cookie, ...): HTTP allows a
// list header to repeat, and nginx before 1.23 sends repeated client headers as repeated params;
// for those app::Request's rule holds (the last value wins, as in PHP). Two of those the host
// reads on every request too, for the request's id (kTraceParent, kRequestId): noted in the same
// pass over the params (param_scan.hpp), with the last value.
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace fcgi_host {

// The params noted in the one pass over the params (param_scan.hpp), under their names: the
// interpreted ones first, then the ids. Their names, in the same order, are kNotedParams.
enum NotedParam : std::size_t {
  kContentLength,
  kRequestMethod,
  kRequestUri,
  kQueryString,
  kScriptName,
  kContentType,
  kRemoteAddr,
  kRequestStart,
  kTraceParent, // the ids: headers, not interpreted
  kRequestId,
};
inline constexpr std::size_t kNotInterpreted = kTraceParent; // the interpreted ones come before

inline constexpr std::array<std::string_view, 10> kNotedParams = {
    "CONTENT_LENGTH",   "REQUEST_METHOD",    "REQUEST_URI", "QUERY_STRING",
    "SCRIPT_NAME",      "CONTENT_TYPE",      "REMOTE_ADDR", "HTTP_X_REQUEST_START",
    "HTTP_TRACEPARENT", "HTTP_X_REQUEST_ID",
};
inline constexpr std::size_t kNotNoted = kNotedParams.size();

namespace detail {
inline std::uint64_t load_word(const char* p) {
  std::uint64_t word;
  std::memcpy(&word, p, sizeof word);
  return word;
}
// `name` holds `known.size()` bytes (8 to 24): equal in two or three overlapping 8-byte words,
// where a memcmp call cost more than the rest of the lookup.
inline bool same_name(const char* name, std::string_view known) {
  const std::size_t n = known.size();
  const char* k = known.data();
  return load_word(name) == load_word(k) && load_word(name + n - 8) == load_word(k + n - 8) &&
         (n <= 16 || load_word(name + 8) == load_word(k + 8));
}
} // namespace detail

// The index of `name` in kNotedParams, or kNotNoted. Called for every param of every request:
// the length and one or two letters pick the one candidate, then one comparison.
inline std::size_t noted_param_index(std::string_view name) {
  std::size_t candidate = kNotNoted;
  switch (name.size()) {
  case 11: // REQUEST_URI, SCRIPT_NAME, REMOTE_ADDR
    candidate = name[0] == 'S'   ? kScriptName
                : name[0] != 'R' ? kNotNoted
                : name[2] == 'Q' ? kRequestUri
                                 : kRemoteAddr;
    break;
  case 12: // QUERY_STRING, CONTENT_TYPE
    candidate = name[0] == 'Q' ? kQueryString : name[0] == 'C' ? kContentType : kNotNoted;
    break;
  case 14: // CONTENT_LENGTH, REQUEST_METHOD
    candidate = name[0] == 'C' ? kContentLength : name[0] == 'R' ? kRequestMethod : kNotNoted;
    break;
  case 16: // HTTP_TRACEPARENT
    candidate = kTraceParent;
    break;
  case 17: // HTTP_X_REQUEST_ID
    candidate = kRequestId;
    break;
  case 20: // HTTP_X_REQUEST_START
    candidate = kRequestStart;
    break;
  default:
    return kNotNoted;
  }
  return candidate != kNotNoted && detail::same_name(name.data(), kNotedParams[candidate])
             ? candidate
             : kNotNoted;
}

} // namespace fcgi_host
