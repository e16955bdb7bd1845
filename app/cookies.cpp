#include "app/cookies.hpp"

#include <stdexcept>

namespace app {
namespace {

bool is_token_char(unsigned char c) {
  if (c <= 32 || c >= 127) return false;
  return std::string_view("()<>@,;:\\\"/[]?={}").find(static_cast<char>(c)) ==
         std::string_view::npos;
}

bool is_cookie_octet(unsigned char c) {
  return c == 0x21 || (c >= 0x23 && c <= 0x2B) || (c >= 0x2D && c <= 0x3A) ||
         (c >= 0x3C && c <= 0x5B) || (c >= 0x5D && c <= 0x7E);
}

void check_attribute(std::string_view what, std::string_view text) {
  for (unsigned char c : text)
    if (c < 32 || c == 127 || c == ';')
      throw std::invalid_argument("cookie " + std::string(what) + " holds ';' or a control byte");
}

} // namespace

std::optional<std::string_view> find_cookie(std::string_view header, std::string_view name) {
  std::optional<std::string_view> found;
  for_each_cookie(header, [&](std::string_view n, std::string_view v) {
    if (!found && n == name) found = v;
  });
  return found;
}

std::string Cookie::to_header() const {
  if (name.empty()) throw std::invalid_argument("cookie name is empty");
  for (unsigned char c : name)
    if (!is_token_char(c)) throw std::invalid_argument("cookie name is not a token: " + name);
  for (unsigned char c : value)
    if (!is_cookie_octet(c))
      throw std::invalid_argument("cookie value holds a blank, quote, ',', ';', '\\' or control "
                                  "byte (percent-encode it): " +
                                  name);
  check_attribute("path", path);
  check_attribute("domain", domain);
  check_attribute("expires", expires);
  std::string out = name + "=" + value;
  if (!path.empty()) out += "; Path=" + path;
  if (!domain.empty()) out += "; Domain=" + domain;
  if (max_age) out += "; Max-Age=" + std::to_string(*max_age > 0 ? *max_age : 0);
  if (!expires.empty()) out += "; Expires=" + expires;
  if (http_only) out += "; HttpOnly";
  if (secure || same_site == SameSite::None) out += "; Secure";
  switch (same_site) {
  case SameSite::Unset:
    break;
  case SameSite::Strict:
    out += "; SameSite=Strict";
    break;
  case SameSite::Lax:
    out += "; SameSite=Lax";
    break;
  case SameSite::None:
    out += "; SameSite=None";
    break;
  }
  return out;
}

} // namespace app
