#pragma once
// Percent-decoding and application/x-www-form-urlencoded parsing (query strings, form bodies).
//
// Decoding is lenient, as browsers and most servers are: "%41" is "A"; a '%' that is not
// followed by two hex digits ("%", "%4", "%zz") is kept as it is; "%00" decodes to a NUL byte
// (the value is a string_view with a size, not a C string). In query strings and form bodies '+'
// is a space; in path segments it is a '+'.
#include <string>
#include <string_view>

namespace app {

// The value of one hex digit, either case; -1 for anything else. Pure and allocation-free, so
// a fatal-signal handler may use it too (the crash capture's form redaction).
constexpr int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Appends the decoded `text` to `out`.
void percent_decode(std::string_view text, bool plus_is_space, std::string& out);
std::string percent_decode(std::string_view text, bool plus_is_space = false);
// Percent-encodes everything but unreserved characters (A-Z a-z 0-9 - . _ ~).
std::string percent_encode(std::string_view text);

// Calls fn(raw_name, raw_value) for each '&'-separated pair of `text`, still encoded. Empty pairs
// ("a=1&&b=2") are skipped; a pair without '=' ("flag") has an empty value.
template <class Fn> void for_each_urlencoded_pair(std::string_view text, Fn&& fn) {
  while (!text.empty()) {
    std::size_t amp = text.find('&');
    std::string_view pair = text.substr(0, amp);
    if (!pair.empty()) {
      std::size_t eq = pair.find('=');
      fn(pair.substr(0, eq),
         eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1));
    }
    if (amp == std::string_view::npos) break;
    text.remove_prefix(amp + 1);
  }
}

} // namespace app
