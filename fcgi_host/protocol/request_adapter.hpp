#pragma once
// Between the wire and the handler API: hands a decoded request (request_decoder.hpp) to
// app::Request as views, and writes app::Response as a CGI response (Status line, headers, blank
// line, body) to libfcgi's output stream.
#include "app/request.hpp"
#include "app/response.hpp"
#include "fcgi_host/protocol/libfcgi_io.hpp"
#include "fcgi_host/protocol/record_guard.hpp"
#include "fcgi_host/protocol/request_decoder.hpp"

#include <cstddef>
#include <fcgiapp.h>

namespace fcgi_host {

// Fills `request` (cleared first, its buffers reused): the params as views into the decoded
// request's buffer (no copy), the body appended to the request's own body (which spills to a
// temporary file above its threshold). False if the body could not be stored. The handler sees
// what the guard decided (`framing`): an interpreted param sent twice with one value once, and a
// body of unknown length (CONTENT_LENGTH absent, empty or -1) with its real length as
// CONTENT_LENGTH.
bool fill_request(const DecodedRequest& from, const RequestFraming& framing, app::Request& request);

// Writes the status line and headers, adding Content-Length for a buffered body that has none;
// write_head_refusal() instead when a header is not valid (cgi::valid_header): a handler's name
// or value must never forge a header.
void write_head(const app::Response& response, bool add_content_length, FCGX_Stream* out);

// What answers a response whose head, with the 8-byte header of the record that carries it, is
// larger than the limit (the web server would otherwise answer 502 for a head larger than its
// buffer, and nobody would know why), or holds a header that is none: a whole 500.
void write_head_refusal(FCGX_Stream* out);

// Streams the head and body chunks of a handler that calls Response::write(). A head larger
// than the limit, or with an invalid header, becomes write_head_refusal(), and the body chunks
// after it are dropped.
// `source` (optional) is the connection the writer's records go to: a large chunk goes there
// directly, as records around the caller's bytes (libfcgi_io::write_stdout_records), instead of
// being copied through libfcgi's buffer; and the writes' failure shows there (write_failed: the
// host's OS_Write never reports one to libfcgi).
class StreamSink : public app::BodySink {
public:
  explicit StreamSink(FCGX_Stream* out, libfcgi_io::Source* source = nullptr)
      : out_(out), source_(source) {}
  void attach(FCGX_Stream* out, libfcgi_io::Source* source) {
    out_ = out;
    source_ = source;
    refused_head_ = 0;
  }
  void set_head_limit(std::size_t limit) { head_limit_ = limit; }
  void send_head(const app::Response& response) override;
  bool send_body(std::string_view chunk) override;
  bool flush() override;
  // The size of the head refused since attach(), or 0.
  std::size_t refused_head() const { return refused_head_; }

private:
  FCGX_Stream* out_;
  libfcgi_io::Source* source_;
  std::size_t head_limit_ = static_cast<std::size_t>(-1);
  std::size_t refused_head_ = 0;
};

// Sends a whole buffered response: head, then body; or write_head_refusal() when its head is
// larger than `head_limit` or holds an invalid header. Returns the size of the refused head, or 0.
// A large body goes to `source` (when given) as records around its bytes, as a stream's chunks do.
std::size_t write_response(const app::Response& response, FCGX_Stream* out,
                           std::size_t head_limit = static_cast<std::size_t>(-1),
                           libfcgi_io::Source* source = nullptr);

// A body chunk this large goes to the connection directly (libfcgi_io::write_stdout_records),
// with what libfcgi's writer holds before it, instead of through libfcgi's 8 KiB buffer.
inline constexpr std::size_t kDirectChunk = 16 * 1024;
// The chunk through that path: libfcgi's writer flushed into the same gathered write.
bool put_direct(FCGX_Stream* out, libfcgi_io::Source& source, std::string_view chunk);

} // namespace fcgi_host
