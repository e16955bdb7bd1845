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
// for those app::Request's rule holds (the last value wins, as in PHP).
#include <array>
#include <cstddef>
#include <string_view>

namespace fcgi_host {

inline constexpr std::array<std::string_view, 8> kInterpretedParams = {
    "CONTENT_LENGTH", "REQUEST_METHOD", "REQUEST_URI", "QUERY_STRING",
    "SCRIPT_NAME",    "CONTENT_TYPE",   "REMOTE_ADDR", "HTTP_X_REQUEST_START",
};
inline constexpr std::size_t kNotInterpreted = kInterpretedParams.size();

// The index of `name` in kInterpretedParams, or kNotInterpreted. Called for every param of every
// request: the length and one or two letters pick the one candidate, then one comparison.
constexpr std::size_t interpreted_param_index(std::string_view name) {
  std::size_t candidate = kNotInterpreted;
  switch (name.size()) {
  case 11: // REQUEST_URI, SCRIPT_NAME, REMOTE_ADDR
    candidate = name[0] == 'S' ? 4 : name[0] != 'R' ? kNotInterpreted : name[2] == 'Q' ? 2 : 6;
    break;
  case 12: // QUERY_STRING, CONTENT_TYPE
    candidate = name[0] == 'Q' ? 3 : name[0] == 'C' ? 5 : kNotInterpreted;
    break;
  case 14: // CONTENT_LENGTH, REQUEST_METHOD
    candidate = name[0] == 'C' ? 0 : name[0] == 'R' ? 1 : kNotInterpreted;
    break;
  case 20: // HTTP_X_REQUEST_START
    candidate = 7;
    break;
  default:
    break;
  }
  return candidate != kNotInterpreted && kInterpretedParams[candidate] == name ? candidate
                                                                               : kNotInterpreted;
}

} // namespace fcgi_host
