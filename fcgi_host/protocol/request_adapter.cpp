#include "fcgi_host/protocol/request_adapter.hpp"

#include "fcgi_host/protocol/cgi_head.hpp"

#include <cstring>
#include <exception>

namespace fcgi_host {
namespace {

void put(FCGX_Stream* out, std::string_view text) {
  FCGX_PutStr(text.data(), static_cast<int>(text.size()), out);
}

} // namespace

bool copy_request(FCGX_Request& from, std::size_t body_size, app::Request& request) {
  request.clear();
  for (char** p = from.envp; p && *p; ++p) {
    // libfcgi stores "NAME=VALUE"; the record guard refused names holding '='.
    const char* eq = std::strchr(*p, '=');
    if (!eq) continue;
    request.add_param(std::string_view(*p, static_cast<std::size_t>(eq - *p)), eq + 1);
  }
  request.finish_params();
  // Bodies above the request's spill threshold go to a temporary file as they are read.
  // A temporary file that cannot be written makes the request fail as an incomplete one.
  char chunk[16 * 1024];
  std::size_t got = 0;
  try {
    request.expect_body(body_size);
    while (got < body_size) {
      int n =
          FCGX_GetStr(chunk, static_cast<int>(std::min(body_size - got, sizeof chunk)), from.in);
      if (n <= 0) break;
      request.append_body(chunk, static_cast<std::size_t>(n));
      got += static_cast<std::size_t>(n);
    }
    request.finish_body();
  } catch (const std::exception&) {
    return false;
  }
  return got == body_size;
}

void write_head(const app::Response& response, bool add_content_length, FCGX_Stream* out) {
  // One buffer per thread (in-process hosts run several workers in one process), reused: no
  // allocation per request once it has grown to the largest head.
  thread_local std::string head;
  head.clear();
  cgi::append_head(head, response.status, response.headers,
                   add_content_length ? std::optional(response.body.size()) : std::nullopt);
  put(out, head);
}

bool StreamSink::send_body(std::string_view chunk) {
  put(out_, chunk);
  return FCGX_GetError(out_) == 0;
}

void write_response(const app::Response& response, FCGX_Stream* out) {
  write_head(response, true, out);
  if (!response.body.empty()) put(out, response.body);
}

} // namespace fcgi_host
