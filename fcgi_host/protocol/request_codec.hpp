#pragma once
// The worker's one interface to the request and response of the wire: a complete request
// (framed and checked by RecordGuard) is decoded into app::Request as views over the
// connection's buffer (request_decoder.hpp: no copy, no allocation), and its response encoded
// by libfcgi as STDOUT records, through one libfcgi writer per codec that lives from request to
// request (libfcgi_io.hpp); the codec ends the stream and writes FCGI_END_REQUEST itself (a
// closed libfcgi writer cannot be used again). No libfcgi type crosses this interface.
//
//   codec.decode(request_bytes, request)  → the handler runs →  codec.send(response) or
//   response.write() through codec.sink()  →  codec.finish() (or codec.abort())
#include "app/request.hpp"
#include "app/response.hpp"
#include "fcgi_host/protocol/record_guard.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace fcgi_host {

class RequestCodec {
public:
  RequestCodec();
  ~RequestCodec();
  RequestCodec(const RequestCodec&) = delete;
  RequestCodec& operator=(const RequestCodec&) = delete;

  // FCGX_Init, then the self-test that proves libfcgi reads and writes through the host
  // (libfcgi_io.hpp). Once per process, before the first decode; false with `error` set.
  // libfcgi installs handlers for SIGPIPE (ignore), SIGUSR1 and SIGTERM: set yours after it.
  static bool init_library(std::string& error);

  enum class Decoded {
    Whole,     // params and the whole body are in `request`
    ShortBody, // the body could not be stored (its temporary file): answer 400
    Refused,   // the decoder refused what the guard accepted: close the connection
  };
  // Decodes the records of one request, records[0, size) of `fd`'s buffer (params split over
  // several records are joined in place there). `request` holds views into those bytes until
  // they are consumed; `framing` is what the guard decided about them. A streamed response that
  // follows is written to `fd`, waiting for the client until `write_deadline_ns`
  // (CLOCK_MONOTONIC) at the most.
  Decoded decode(int fd, char* records, std::size_t size, const RequestFraming& framing,
                 std::uint64_t write_deadline_ns, app::Request& request);

  // The request's params and the body so far into `request`, as decode() does, without opening
  // its response: what the worker asks the handler about before its body is whole
  // (Handler::streams_body). Refused when the records are not one request's. Params sent in
  // several records are joined in place, which can be done once: then decode() must not follow.
  Decoded peek(char* records, std::size_t size, const RequestFraming& framing,
               app::Request& request);

  // After decode(): the response goes to `deliver` instead of the socket, all of it, streamed or
  // not (a handler thread's: the worker's loop writes it). false from it: the client is gone.
  using Deliver = bool (*)(void* context, const char* data, std::size_t size);
  void deliver_to(Deliver deliver, void* context);

  // A response head larger than `bytes` with its record's 8-byte header is answered with a whole
  // 500 instead (buffered or streamed; the chunks of a streamed body after it are dropped):
  // --max-response-head.
  void set_head_limit(std::size_t bytes);
  // The size of the head refused for the current request, or 0 (the worker logs it).
  std::size_t refused_head() const;

  // Where Response::write() sends a streamed response (head, then chunks).
  app::BodySink& sink();
  // Sends a whole buffered response: status line, headers (with Content-Length), body. What
  // the socket does not take at once, up to the end of the request, goes to `backlog`: the
  // caller sends it as the client reads, without waiting here.
  void send(const app::Response& response, std::string* backlog);

  enum class Ending {
    Kept,        // the request ended cleanly and the connection may serve another
    Closed,      // the request ended cleanly; the client did not ask to keep the connection
                 // (FCGI_KEEP_CONN not set)
    WriteFailed, // the client went away or stopped reading: close the connection
  };
  // Ends the request (flushes, the empty STDOUT record, FCGI_END_REQUEST).
  Ending finish();
  // Ends it without FCGI_END_REQUEST after what was written so far, with a record the web server
  // must refuse: it sees the response cut (a truncated transfer to its client, not a clean
  // end). Close the connection after.
  void abort();

private:
  struct State;
  std::unique_ptr<State> state_;
};

} // namespace fcgi_host
