#pragma once
// The health port's request parser (--health-listen): one HTTP/1.0 or 1.1 request head, strictly,
// within fixed caps, pure logic over the bytes read so far. GET and HEAD only, no body, no
// continuation lines, CRLF line ends: what a Kubernetes probe, curl and a Prometheus scrape
// send, and nothing else. Not a general HTTP parser (docs/deploy.md).
#include <cstddef>
#include <string_view>

namespace fcgi_host {

inline constexpr std::size_t kMaxHealthRequestLine = 1024;
inline constexpr std::size_t kMaxHealthHead = 8192; // request line and headers
inline constexpr std::size_t kMaxHealthHeaders = 64;

struct HealthRequest {
  enum class Verdict {
    NeedMore, // no complete head yet, and within the caps
    Ready,    // a whole, valid head: method, path, accept are set
    Bad,      // answer `status` with `why`, then close
  };
  Verdict verdict = Verdict::NeedMore;
  int status = 0;
  std::string_view why;
  bool head = false;       // HEAD: the answer's headers only
  std::string_view path;   // the target up to '?'
  std::string_view accept; // the Accept header (the metrics' format)
};

// `bytes`: everything read from the connection so far (views point into it).
HealthRequest parse_health_request(std::string_view bytes);

} // namespace fcgi_host
