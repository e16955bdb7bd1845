#pragma once
// Between the wire and the handler API: hands a decoded request (request_decoder.hpp) to
// app::Request as views, and writes app::Response as a CGI response (Status line, headers, blank
// line, body) to libfcgi's output stream.
#include "app/request.hpp"
#include "app/response.hpp"
#include "fcgi_host/protocol/request_decoder.hpp"

#include <cstddef>
#include <fcgiapp.h>

namespace fcgi_host {

// Fills `request` (cleared first, its buffers reused): the params as views into the decoded
// request's buffer (no copy), the body appended to the request's own body (which spills to a
// temporary file above its threshold). False if the body could not be stored.
bool fill_request(const DecodedRequest& from, app::Request& request);

// Writes the status line and headers, adding Content-Length for a buffered body that has none.
// CR and LF inside a header value are replaced by spaces: a handler bug must not split headers.
void write_head(const app::Response& response, bool add_content_length, FCGX_Stream* out);

// Streams the head and body chunks of a handler that calls Response::write().
// `failed` (optional) is where the writes' failure shows (libfcgi_io::Source::write_failed: the
// host's OS_Write never reports one to libfcgi).
class StreamSink : public app::BodySink {
public:
  explicit StreamSink(FCGX_Stream* out, const bool* failed = nullptr)
      : out_(out), failed_(failed) {}
  void attach(FCGX_Stream* out, const bool* failed) {
    out_ = out;
    failed_ = failed;
  }
  void send_head(const app::Response& response) override { write_head(response, false, out_); }
  bool send_body(std::string_view chunk) override;

private:
  FCGX_Stream* out_;
  const bool* failed_;
};

// Sends a whole buffered response: head, then body.
void write_response(const app::Response& response, FCGX_Stream* out);

} // namespace fcgi_host
