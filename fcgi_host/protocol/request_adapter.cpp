#include "fcgi_host/protocol/request_adapter.hpp"

#include <charconv>
#include <cstring>
#include <exception>

namespace fcgi_host {
namespace {

void put(FCGX_Stream* out, std::string_view text) {
  FCGX_PutStr(text.data(), static_cast<int>(text.size()), out);
}

void put_header_text(FCGX_Stream* out, std::string_view text) {
  while (!text.empty()) {
    std::size_t bad = text.find_first_of("\r\n");
    put(out, text.substr(0, bad));
    if (bad == std::string_view::npos) return;
    put(out, " ");
    text.remove_prefix(bad + 1);
  }
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
  char number[24];
  auto status = std::to_chars(number, number + sizeof number, response.status);
  put(out, "Status: ");
  put(out, std::string_view(number, static_cast<std::size_t>(status.ptr - number)));
  put(out, " ");
  put(out, app::reason_phrase(response.status));
  put(out, "\r\n");
  bool has_length = false;
  for (const auto& [name, value] : response.headers) {
    put_header_text(out, name);
    put(out, ": ");
    put_header_text(out, value);
    put(out, "\r\n");
    if (!has_length && name.size() == 14 && strncasecmp(name.c_str(), "Content-Length", 14) == 0)
      has_length = true;
  }
  if (add_content_length && !has_length) {
    auto length = std::to_chars(number, number + sizeof number, response.body.size());
    put(out, "Content-Length: ");
    put(out, std::string_view(number, static_cast<std::size_t>(length.ptr - number)));
    put(out, "\r\n");
  }
  put(out, "\r\n");
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
