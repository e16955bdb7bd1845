#include "fcgi_host/protocol/request_adapter.hpp"

#include "app/host_access.hpp"
#include "fcgi_host/protocol/cgi_head.hpp"
#include "fcgi_host/protocol/interpreted_params.hpp"

#include <charconv>
#include <cstddef>
#include <cstring>
#include <exception>

namespace fcgi_host {
namespace {

void put(FCGX_Stream* out, std::string_view text) {
  FCGX_PutStr(text.data(), static_cast<int>(text.size()), out);
}

// libfcgi puts the role first among the params, as php-fpm does; handlers have seen it.
void add_role(app::Request& request) {
  request.add_param_view("FCGI_ROLE", "RESPONDER");
}

// A body of unknown length: its real length as CONTENT_LENGTH.
void add_body_length(const RequestFraming& framing, app::Request& request) {
  if (framing.length_declared || framing.body_size == 0 || framing.body_streamed) return;
  char number[24];
  auto end = std::to_chars(number, number + sizeof number, framing.body_size);
  request.add_param("CONTENT_LENGTH", // a copy: only for a body of unknown length
                    std::string_view(number, static_cast<std::size_t>(end.ptr - number)));
}

// The params of a request decoded with the guard's scan: the scan says where CONTENT_LENGTH and
// the params app::Request derives its fields from are, so no param is looked at by name again,
// and gives an interpreted param sent twice with one value (rare) once.
void add_scanned_params(const DecodedRequest& from, const RequestFraming& framing,
                        app::Request& request) {
  const ScannedParams& scanned = *from.scanned;
  const char* base = from.params_base;
  // 1 + the index of the one CONTENT_LENGTH, when it is replaced by the body's real length.
  const std::size_t skip = framing.length_declared ? 0 : scanned.served_content_length();
  const std::span<const ParamSpan> spans = scanned.served();
  add_role(request);
  app::HostAccess::set_wire_params(request, base, spans.data(), spans.size(), skip);
  add_body_length(framing, request);
  auto value = [&](std::size_t noted) {
    const std::uint32_t at = scanned.noted[noted];
    return at ? scanned.pair(base, at - 1).value : std::string_view{};
  };
  app::HostAccess::finish_params(
      request, {value(kRequestMethod), value(kRequestUri), value(kQueryString), value(kScriptName),
                value(kRequestId), value(kTraceParent), value(kRequestStart)});
}

// The web server reads the head into one buffer with the header of the STDOUT record that
// carries it (nginx: fastcgi_buffer_size holds both), and needs a byte more: nginx 1.22 answers
// 502 for a head that does not fit, and loses the body of one that fills the buffer exactly.
constexpr std::size_t kRecordHeader = 8;

} // namespace

bool fill_request(const DecodedRequest& from, const RequestFraming& framing,
                  app::Request& request) {
  request.clear();
  add_scanned_params(from, framing, request);
  // Bodies above the request's spill threshold go to a temporary file as they are stored.
  // A temporary file that cannot be written makes the request fail as an incomplete one.
  try {
    // Without a body (the usual GET) there is nothing to reserve: clear() emptied the body.
    if (from.body_size != 0) request.expect_body(from.body_size);
    for (std::string_view chunk : from.body)
      request.append_body(chunk.data(), chunk.size());
    request.finish_body();
  } catch (const std::exception&) {
    return false;
  }
  return true;
}

namespace {

// The head of `response`, in one buffer per thread (in-process hosts run several workers in one
// process), reused: no allocation per request once it has grown to the largest head. Composed
// before the limit is checked, so that its size is measured once, by the writer itself. `valid`:
// every header is one (cgi::valid_header); otherwise the head must not go out.
std::string& compose_head(const app::Response& response, bool add_content_length, bool& valid) {
  thread_local std::string head;
  head.clear();
  valid = cgi::append_head(head, response.status, response.headers,
                           add_content_length ? std::optional(response.body.size()) : std::nullopt);
  return head;
}

// Refused: a head larger than the web server's buffer, or with a header that is none.
bool refused(const std::string& head, bool valid, std::size_t head_limit) {
  return !valid || head.size() + kRecordHeader >= head_limit;
}

// A body this small goes out in the head's FCGX_PutStr call rather than a call of its own.
constexpr std::size_t kBodyWithHead = 1024;

} // namespace

void write_head(const app::Response& response, bool add_content_length, FCGX_Stream* out) {
  bool valid = true;
  const std::string& head = compose_head(response, add_content_length, valid);
  if (valid)
    put(out, head);
  else
    write_head_refusal(out);
}

void write_head_refusal(FCGX_Stream* out) {
  put(out, "Status: 500 Internal Server Error\r\nContent-Type: text/plain\r\n"
           "Content-Length: 22\r\n\r\nInternal Server Error\n");
}

void StreamSink::send_head(const app::Response& response) {
  bool valid = true;
  const std::string& head = compose_head(response, false, valid);
  if (refused(head, valid, head_limit_)) {
    refused_head_ = head.size();
    write_head_refusal(out_);
    return;
  }
  put(out_, head);
}

bool put_direct(FCGX_Stream* out, libfcgi_io::Source& source, std::string_view chunk) {
  // What libfcgi's writer holds (the head, small chunks) is framed already: it goes first, in
  // the same system call.
  thread_local std::string held;
  held.clear();
  source.gather = &held;
  FCGX_FFlush(out);
  source.gather = nullptr;
  return libfcgi_io::write_stdout_records(source, held, chunk.data(), chunk.size());
}

bool StreamSink::send_body(std::string_view chunk) {
  if (refused_head_) return false; // the client has its whole 500 already
  if (source_ && chunk.size() >= kDirectChunk)
    put_direct(out_, *source_, chunk);
  else
    put(out_, chunk);
  return FCGX_GetError(out_) == 0 && !(source_ && source_->write_failed);
}

bool StreamSink::flush() {
  if (refused_head_) return false;
  FCGX_FFlush(out_);
  return FCGX_GetError(out_) == 0 && !(source_ && source_->write_failed);
}

std::size_t write_response(const app::Response& response, FCGX_Stream* out, std::size_t head_limit,
                           libfcgi_io::Source* source) {
  bool valid = true;
  std::string& head = compose_head(response, true, valid);
  if (refused(head, valid, head_limit)) {
    write_head_refusal(out);
    return head.size();
  }
  if (response.status != 200 && app::status_without_content(response.status)) {
    put(out, head); // its body, if the handler set one, is not sent
  } else if (response.body.size() <= kBodyWithHead) {
    head.append(response.body);
    put(out, head);
  } else if (source && response.body.size() >= kDirectChunk) {
    put(out, head);
    put_direct(out, *source, response.body);
  } else {
    put(out, head);
    put(out, response.body);
  }
  return 0;
}

} // namespace fcgi_host
