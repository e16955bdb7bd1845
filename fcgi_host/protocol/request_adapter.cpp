#include "fcgi_host/protocol/request_adapter.hpp"

#include <charconv>
#include <cstring>
#include <exception>

namespace fcgi_host {
namespace {

void put(FCGX_Stream* out, std::string_view text) {
  FCGX_PutStr(text.data(), static_cast<int>(text.size()), out);
}

// CR and LF become spaces: a handler bug must not split headers. One plain pass (find_first_of
// looks each character up in its set, several times slower on short header text).
void append_header_text(std::string& out, std::string_view text) {
  const std::size_t start = out.size();
  out.append(text);
  for (std::size_t i = start; i < out.size(); ++i)
    if (out[i] == '\r' || out[i] == '\n') out[i] = ' ';
}

} // namespace

bool fill_request(const DecodedRequest& from, app::Request& request) {
  request.clear();
  // libfcgi puts the role first among the params, as php-fpm does; handlers have seen it.
  request.add_param_view("FCGI_ROLE", "RESPONDER");
  for (const records::NameValue& p : from.params)
    request.add_param_view(p.name, p.value);
  request.finish_params();
  // Bodies above the request's spill threshold go to a temporary file as they are stored.
  // A temporary file that cannot be written makes the request fail as an incomplete one.
  try {
    request.expect_body(from.body_size);
    for (std::string_view chunk : from.body)
      request.append_body(chunk.data(), chunk.size());
    request.finish_body();
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

void write_head(const app::Response& response, bool add_content_length, FCGX_Stream* out) {
  // Composed in a buffer each thread reuses, then handed to libfcgi at once: one FCGX_PutStr
  // rather than one per piece (it was a tenth of a hello request's instructions).
  thread_local std::string head;
  head.clear();
  char number[24];
  auto status = std::to_chars(number, number + sizeof number, response.status);
  head.append("Status: ");
  head.append(number, status.ptr);
  head.push_back(' ');
  head.append(app::reason_phrase(response.status));
  head.append("\r\n");
  bool has_length = false;
  for (const auto& [name, value] : response.headers) {
    append_header_text(head, name);
    head.append(": ");
    append_header_text(head, value);
    head.append("\r\n");
    if (!has_length && name.size() == 14 && strncasecmp(name.c_str(), "Content-Length", 14) == 0)
      has_length = true;
  }
  if (add_content_length && !has_length) {
    auto length = std::to_chars(number, number + sizeof number, response.body.size());
    head.append("Content-Length: ");
    head.append(number, length.ptr);
    head.append("\r\n");
  }
  head.append("\r\n");
  put(out, head);
}

bool StreamSink::send_body(std::string_view chunk) {
  put(out_, chunk);
  return FCGX_GetError(out_) == 0 && !(failed_ && *failed_);
}

void write_response(const app::Response& response, FCGX_Stream* out) {
  write_head(response, true, out);
  if (!response.body.empty()) put(out, response.body);
}

} // namespace fcgi_host
