#include "fcgi_host/observe/health_request.hpp"

namespace fcgi_host {
namespace {

using Verdict = HealthRequest::Verdict;

HealthRequest bad(int status, std::string_view why) {
  HealthRequest r;
  r.verdict = Verdict::Bad;
  r.status = status;
  r.why = why;
  return r;
}

// RFC 9110's tchar: the characters of a method and a header name.
bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (unsigned char c : s) {
    const bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
    if (!alnum &&
        std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) == std::string_view::npos)
      return false;
  }
  return true;
}

// Visible ASCII only: no spaces, controls or bytes above 0x7e in a target.
bool is_visible(std::string_view s) {
  for (unsigned char c : s)
    if (c <= 0x20 || c >= 0x7f) return false;
  return true;
}

// A header value: visible ASCII, spaces and tabs (obs-text refused).
bool is_field_value(std::string_view s) {
  for (unsigned char c : s)
    if ((c < 0x20 && c != '\t') || c >= 0x7f) return false;
  return true;
}

bool equals_nocase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

std::string_view trim(std::string_view v) {
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t'))
    v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t'))
    v.remove_suffix(1);
  return v;
}

// "GET /readyz HTTP/1.1"
HealthRequest request_line(std::string_view line) {
  const std::size_t sp1 = line.find(' ');
  const std::size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return bad(400, "malformed request line");
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!is_token(method)) return bad(400, "malformed method");
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    if (version.starts_with("HTTP/")) return bad(505, "only HTTP/1.0 and HTTP/1.1");
    return bad(400, "malformed version");
  }
  if (target.empty() || target.front() != '/' || !is_visible(target))
    return bad(400, "malformed target");
  if (method != "GET" && method != "HEAD") return bad(405, "GET and HEAD only");
  HealthRequest r;
  r.head = method == "HEAD";
  r.path = target.substr(0, target.find('?'));
  return r;
}

// One header line into `r`; a body announced is refused.
bool header_line(std::string_view line, HealthRequest& r) {
  const std::size_t colon = line.find(':');
  if (colon == std::string_view::npos || !is_token(line.substr(0, colon))) {
    r = bad(400, "malformed header");
    return false;
  }
  const std::string_view name = line.substr(0, colon);
  const std::string_view value = trim(line.substr(colon + 1));
  if (!is_field_value(value)) {
    r = bad(400, "malformed header value");
    return false;
  }
  if (equals_nocase(name, "transfer-encoding") ||
      (equals_nocase(name, "content-length") && value != "0")) {
    r = bad(413, "no request bodies");
    return false;
  }
  if (equals_nocase(name, "accept")) r.accept = value;
  return true;
}

} // namespace

HealthRequest parse_health_request(std::string_view bytes) {
  const std::size_t end = bytes.find("\r\n\r\n");
  if (end == std::string_view::npos) {
    const std::size_t first = bytes.find("\r\n");
    if ((first == std::string_view::npos ? bytes.size() : first) > kMaxHealthRequestLine)
      return bad(414, "request line too long");
    if (bytes.size() >= kMaxHealthHead) return bad(431, "request head too large");
    return {};
  }
  if (end + 4 > kMaxHealthHead) return bad(431, "request head too large");
  std::string_view head = bytes.substr(0, end + 2); // every line ends with CRLF
  const std::size_t first = head.find("\r\n");
  if (first > kMaxHealthRequestLine) return bad(414, "request line too long");
  HealthRequest r = request_line(head.substr(0, first));
  if (r.verdict == Verdict::Bad) return r;
  head.remove_prefix(first + 2);
  for (std::size_t count = 0; !head.empty(); ++count) {
    const std::size_t eol = head.find("\r\n");
    const std::string_view line = head.substr(0, eol);
    if (count == kMaxHealthHeaders) return bad(431, "too many headers");
    if (line.find('\n') != std::string_view::npos || line.find('\r') != std::string_view::npos)
      return bad(400, "bare CR or LF");
    if (line.front() == ' ' || line.front() == '\t') return bad(400, "continuation line");
    if (!header_line(line, r)) return r;
    head.remove_prefix(eol + 2);
  }
  r.verdict = Verdict::Ready;
  return r;
}

} // namespace fcgi_host
