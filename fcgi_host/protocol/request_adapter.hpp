#pragma once
// Between libfcgi and the handler API: copies a parsed request out of libfcgi (which frees its
// buffers at FCGX_Finish_r) into app::Request, and writes app::Response as a CGI response
// (Status line, headers, blank line, body) to libfcgi's output stream.
#include "app/request.hpp"
#include "app/response.hpp"
#include "fcgi_host/protocol/record_guard.hpp"

#include <cstddef>
#include <fcgiapp.h>

namespace fcgi_host {

// Fills `request` (cleared first, its buffers reused) from libfcgi's params and reads the whole
// body, `framing.body_size` bytes as the record guard counted them. False if the body came up
// short. The handler sees what the guard decided: an interpreted param sent twice with one
// value once, and a body of unknown length (CONTENT_LENGTH absent, empty or -1) with its real
// length as CONTENT_LENGTH.
bool copy_request(FCGX_Request& from, const RequestFraming& framing, app::Request& request);

// Writes the status line and headers, adding Content-Length for a buffered body that has none.
// CR and LF inside a header value are replaced by spaces: a handler bug must not split headers.
void write_head(const app::Response& response, bool add_content_length, FCGX_Stream* out);

// Streams the head and body chunks of a handler that calls Response::write().
class StreamSink : public app::BodySink {
public:
  explicit StreamSink(FCGX_Stream* out) : out_(out) {}
  void attach(FCGX_Stream* out) { out_ = out; }
  void send_head(const app::Response& response) override { write_head(response, false, out_); }
  bool send_body(std::string_view chunk) override;

private:
  FCGX_Stream* out_;
};

// Sends a whole buffered response: head, then body.
void write_response(const app::Response& response, FCGX_Stream* out);

} // namespace fcgi_host
