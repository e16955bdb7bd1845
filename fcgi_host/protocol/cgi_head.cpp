#include "fcgi_host/protocol/cgi_head.hpp"

#include "app/response.hpp"

#include <algorithm>
#include <charconv>

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

// CR and LF become spaces: a handler bug must not split headers. One plain pass (find_first_of
// looks each character up in its set, several times slower on short header text).
void append_header_text(std::string& out, std::string_view text) {
  const std::size_t start = out.size();
  out.append(text);
  for (std::size_t i = start; i < out.size(); ++i)
    if (out[i] == '\r' || out[i] == '\n') out[i] = ' ';
}

} // namespace

void append_head(std::string& out, int status, const HeaderList& headers,
                 std::optional<std::size_t> content_length) {
  append_status_line(out, status);
  bool has_length = false;
  for (const auto& [name, value] : headers) {
    append_header_text(out, name);
    out.append(": ");
    append_header_text(out, value);
    out.append("\r\n");
    has_length = has_length || same_header_name(name, "Content-Length");
  }
  if (content_length && !has_length) {
    char number[24];
    auto end = std::to_chars(number, number + sizeof number, *content_length).ptr;
    out.append("Content-Length: ").append(number, end).append("\r\n");
  }
  out.append("\r\n");
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
