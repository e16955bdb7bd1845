#include "fcgi_host/protocol/cgi_head.hpp"

#include "app/response.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <cstring>

namespace fcgi_host::cgi {

bool same_header_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

void append_status_line(std::string& out, int status) {
  char number[16];
  auto end = std::to_chars(number, number + sizeof number, status).ptr;
  out.append("Status: ").append(number, end).append(" ");
  out.append(app::reason_phrase(status)).append("\r\n");
}

void append_header_line(std::string& out, std::string_view name, std::string_view value) {
  out.append(name).append(": ").append(value).append("\r\n");
}

namespace {

char* put(char* p, std::string_view text) {
  std::memcpy(p, text.data(), text.size());
  return p + text.size();
}

// What each byte may be in a header name (RFC 9110 5.6.2, a token: letters, digits and
// !#$%&'*+-.^_`|~). A table looked up once per byte, its bits OR-ed together: no branch per
// byte, the verdict at the end.
constexpr unsigned char kNotToken = 1;

constexpr std::array<unsigned char, 256> byte_classes() {
  std::array<unsigned char, 256> classes{};
  for (int b = 0; b < 256; ++b) {
    const bool token =
        (b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z') ||
        std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(b)) != std::string_view::npos;
    classes[b] = token ? 0 : kNotToken;
  }
  return classes;
}
constexpr std::array<unsigned char, 256> kByteClass = byte_classes();

// The classes of a name's bytes OR-ed together (names are short: a lookup per byte).
unsigned char name_classes(std::string_view name) {
  unsigned char classes = 0;
  for (char c : name)
    classes |= kByteClass[static_cast<unsigned char>(c)];
  return classes;
}

// Whether a value holds CR, LF or NUL: compares without a branch or a table, which the compiler
// turns into vector code (values are the long part of a head).
bool value_is_clean(std::string_view value) {
  unsigned char bad = 0;
  for (char c : value)
    bad |= static_cast<unsigned char>((c == '\r') | (c == '\n') | (c == '\0'));
  return bad == 0;
}

bool valid_header_text(std::string_view name, std::string_view value) {
  return !name.empty() && !(name_classes(name) & kNotToken) && value_is_clean(value);
}

} // namespace

// Measured first, then written into `out` grown once: an append per piece (a dozen for a
// small head) cost twice as much as the writing itself, on every response.
bool append_head(std::string& out, int status, const HeaderList& headers,
                 std::optional<std::size_t> content_length) {
  if (status != 200 && app::status_without_content(status)) {
    content_length.reset();
    if (status != 304 && std::any_of(headers.begin(), headers.end(), [](const auto& h) {
          return same_header_name(h.first, "Content-Length");
        })) {
      HeaderList without_length;
      for (const auto& h : headers)
        if (!same_header_name(h.first, "Content-Length")) without_length.push_back(h);
      return append_head(out, status, without_length, std::nullopt);
    }
  }
  char status_digits[16];
  const char* status_end = std::to_chars(status_digits, status_digits + 16, status).ptr;
  const std::string_view reason = app::reason_phrase(status);
  constexpr std::string_view kStatus = "Status: ", kLength = "Content-Length: ", kCrlf = "\r\n";
  std::size_t size = kStatus.size() + static_cast<std::size_t>(status_end - status_digits) + 1 +
                     reason.size() + 2 * kCrlf.size();
  bool has_length = false;
  for (const auto& [name, value] : headers) {
    size += name.size() + 2 + value.size() + kCrlf.size();
    has_length = has_length || same_header_name(name, "Content-Length");
  }
  char length_digits[24];
  const char* length_end = length_digits;
  if (content_length && !has_length) {
    length_end = std::to_chars(length_digits, length_digits + 24, *content_length).ptr;
    size += kLength.size() + static_cast<std::size_t>(length_end - length_digits) + kCrlf.size();
  }
  const std::size_t start = out.size();
  out.resize(start + size);
  char* p = out.data() + start;
  p = put(p, kStatus);
  p = put(p, std::string_view(status_digits, static_cast<std::size_t>(status_end - status_digits)));
  *p++ = ' ';
  p = put(p, reason);
  p = put(p, kCrlf);
  bool valid = true;
  for (const auto& [name, value] : headers) {
    p = put(p, name);
    p = put(p, ": ");
    p = put(p, value);
    p = put(p, kCrlf);
    valid = valid && valid_header_text(name, value);
  }
  if (length_end != length_digits) {
    p = put(p, kLength);
    p = put(p,
            std::string_view(length_digits, static_cast<std::size_t>(length_end - length_digits)));
    p = put(p, kCrlf);
  }
  put(p, kCrlf);
  return valid;
}

bool valid_header(std::string_view name, std::string_view value) {
  return valid_header_text(name, value);
}

Head parse_head(std::string_view output) {
  Head head;
  const std::size_t crlf = output.find("\r\n\r\n"), lf = output.find("\n\n");
  const std::size_t end = std::min(crlf, lf);
  if (end == std::string_view::npos) {
    head.body = output;
    return head;
  }
  head.found = true;
  head.body = output.substr(end + (end == crlf ? 4 : 2));
  std::string_view block = output.substr(0, end);
  while (!block.empty()) {
    const std::size_t nl = block.find('\n');
    std::string_view line = block.substr(0, nl);
    block = nl == std::string_view::npos ? std::string_view{} : block.substr(nl + 1);
    if (line.ends_with('\r')) line.remove_suffix(1);
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view name = line.substr(0, colon), value = line.substr(colon + 1);
    while (value.starts_with(' ') || value.starts_with('\t'))
      value.remove_prefix(1);
    if (same_header_name(name, "Status"))
      std::from_chars(value.data(), value.data() + value.size(), head.status);
    else
      head.headers.emplace_back(name, value);
  }
  return head;
}

} // namespace fcgi_host::cgi
