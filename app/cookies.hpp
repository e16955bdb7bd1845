#pragma once
// Cookies in (the Cookie request header) and out (a Set-Cookie builder).
//
// Reading is tolerant: pairs are split on ';', blanks around names and values are trimmed, a
// token without '=' ("flag; sid=1") is skipped on its own (it does not glue onto the next name),
// a value in double quotes loses them, and when a name comes twice the first wins (browsers send
// the most specific path first). Values are returned as sent, not percent-decoded (RFC 6265
// defines no encoding; use app::percent_decode where your own cookies are encoded).
#include "app/text.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace app {

// The value of cookie `name` in a Cookie header; nullopt when absent.
std::optional<std::string_view> find_cookie(std::string_view cookie_header, std::string_view name);

// Calls fn(name, value) for every cookie in the header, in order (duplicates included).
template <class Fn> void for_each_cookie(std::string_view header, Fn&& fn) {
  while (!header.empty()) {
    std::size_t semi = header.find(';');
    std::string_view pair = header.substr(0, semi);
    std::size_t eq = pair.find('=');
    if (eq != std::string_view::npos) {
      std::string_view name = trim_blanks(pair.substr(0, eq)),
                       value = trim_blanks(pair.substr(eq + 1));
      if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
        value = value.substr(1, value.size() - 2);
      if (!name.empty()) fn(name, value);
    }
    if (semi == std::string_view::npos) break;
    header.remove_prefix(semi + 1);
  }
}

// A Set-Cookie header value. to_header() checks the name (an RFC 6265 token) and the value
// (cookie-octets: no blank, '"', ',', ';', '\\' or control byte; percent_encode() what may hold
// them) and the attributes (no ';' or control byte), and throws std::invalid_argument otherwise:
// a bad cookie must not split or forge headers.
struct Cookie {
  enum class SameSite { Unset, Strict, Lax, None };

  Cookie() = default;
  Cookie(std::string name_, std::string value_)
      : name(std::move(name_)), value(std::move(value_)) {}

  std::string name;
  std::string value;
  std::string path;            // "Path=/" when not empty
  std::string domain;          // "Domain=example.org" when not empty
  std::optional<long> max_age; // seconds; 0 or less deletes the cookie
  std::string expires;         // an HTTP date as text ("Wed, 21 Oct 2026 07:28:00 GMT")
  bool http_only = false;
  bool secure = false; // forced on with SameSite=None, as browsers require
  SameSite same_site = SameSite::Unset;

  std::string to_header() const;
};

} // namespace app
