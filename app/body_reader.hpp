#pragma once
// app::BodyReader: a request body read as it arrives, in pieces, with bounded memory whatever its
// size. A handler (or a Router route, Router::post_stream) that declares it reads the body this
// way (Handler::streams_body) runs as soon as the request's params are in; every other request
// gets its body whole (Request::body()) and its reader reads that.
//
// The host's reader (today: the worker reads the connection itself while the handler runs; the
// interface lets an event loop feed a handler thread instead) keeps the host's limits: a body
// over --max-body throws HttpError(413), one not as long as its CONTENT_LENGTH or cut short by
// the web server HttpError(400), one that stops coming for the body's deadline HttpError(408);
// after any of these the connection is closed once the response went out.
#include <cstddef>
#include <string>

namespace app {

class BodyReader {
public:
  virtual ~BodyReader() = default;
  // Copies up to `size` next bytes of the body into `out`, waiting until at least one arrives;
  // 0 at the end of the body.
  virtual std::size_t read(char* out, std::size_t size) = 0;

  // Reads the rest of the body and appends it to `out` (bounded by the host's --max-body).
  void read_all(std::string& out) {
    char piece[64 * 1024];
    for (std::size_t n; (n = read(piece, sizeof piece)) > 0;)
      out.append(piece, n);
  }
};

} // namespace app
