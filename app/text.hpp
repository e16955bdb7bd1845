#pragma once
// Small text helpers for HTTP header values, shared by the parsers and handlers.
#include <algorithm>
#include <string_view>

namespace app {

// ASCII case-insensitive equality (header names, media types, parameter names).
inline bool iequals(std::string_view a, std::string_view b) {
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(),
                                            [&](char x, char y) { return lower(x) == lower(y); });
}

// Without the spaces and tabs around it.
inline std::string_view trim_blanks(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

// The media type of a Content-Type value, without parameters: "text/html" of
// "text/html; charset=utf-8". Compare it with iequals().
inline std::string_view media_type(std::string_view content_type) {
  return trim_blanks(content_type.substr(0, content_type.find(';')));
}

} // namespace app
