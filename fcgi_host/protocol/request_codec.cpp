#include "fcgi_host/protocol/request_codec.hpp"

#include "fcgi_host/net/socket_write.hpp"
#include "fcgi_host/protocol/libfcgi_io.hpp"
#include "fcgi_host/protocol/request_adapter.hpp"

#include <fcgiapp.h>
#include <mutex>

namespace fcgi_host {

struct RequestCodec::State {
  FCGX_Request fcgx{};
  libfcgi_io::Source source;
  StreamSink sink{nullptr};
  std::size_t head_limit = static_cast<std::size_t>(-1);
  std::size_t refused_head = 0; // of the buffered response
  bool active = false;          // decoded, not yet finished or aborted
};

RequestCodec::RequestCodec() : state_(std::make_unique<State>()) {
  FCGX_InitRequest(&state_->fcgx, -1, 0);
}

RequestCodec::~RequestCodec() {
  if (state_->active) abort();
}

bool RequestCodec::init_library(std::string& error) {
  // Once per process: FCGX_Init is not thread-safe (two in-process hosts starting together
  // would both set libfcgi up, and one set-up would leak).
  static std::once_flag once;
  static std::string failure;
  std::call_once(once, [] {
    if (FCGX_Init() != 0)
      failure = "FCGX_Init() failed";
    else if (!libfcgi_io::self_test())
      failure = "libfcgi does not use the host's socket I/O (OS_Read/OS_Write were not "
                "replaced); refusing to serve with libfcgi's own I/O";
  });
  error = failure;
  return failure.empty();
}

RequestCodec::Decoded RequestCodec::decode(int fd, std::string_view records,
                                           const RequestFraming& framing,
                                           std::uint64_t write_deadline_ns, app::Request& request) {
  State& s = *state_;
  s.source = libfcgi_io::Source{};
  s.source.fd = fd;
  s.source.data = records.data();
  s.source.size = records.size();
  s.source.write_deadline_ns = write_deadline_ns;
  libfcgi_io::register_source(&s.source);
  s.fcgx.ipcFd = fd;
  // FCGX_Accept_r starts by finishing the previous request, closing its fd unless kept: that
  // request is already finished, and the fd is now this connection's.
  s.fcgx.keepConnection = 1;
  if (FCGX_Accept_r(&s.fcgx) != 0) {
    libfcgi_io::unregister_source(&s.source);
    s.fcgx.ipcFd = -1;
    return Decoded::Refused;
  }
  s.active = true;
  s.refused_head = 0;
  s.sink.attach(s.fcgx.out);
  return copy_request(s.fcgx, framing, request) ? Decoded::Whole : Decoded::ShortBody;
}

app::BodySink& RequestCodec::sink() {
  return state_->sink;
}

void RequestCodec::set_head_limit(std::size_t bytes) {
  state_->head_limit = bytes;
  state_->sink.set_head_limit(bytes);
}

std::size_t RequestCodec::refused_head() const {
  return state_->refused_head ? state_->refused_head : state_->sink.refused_head();
}

void RequestCodec::send(const app::Response& response, std::string* backlog) {
  state_->source.backlog = backlog;
  state_->refused_head = write_response(response, state_->fcgx.out, state_->head_limit);
}

RequestCodec::Ending RequestCodec::finish() {
  State& s = *state_;
  FCGX_Finish_r(&s.fcgx); // flushes; without FCGI_KEEP_CONN it calls our OS_IpcClose
  libfcgi_io::unregister_source(&s.source);
  s.fcgx.ipcFd = -1;
  s.active = false;
  if (s.source.write_failed) return Ending::WriteFailed;
  return s.source.closed_by_libfcgi ? Ending::Closed : Ending::Kept;
}

void RequestCodec::abort() {
  State& s = *state_;
  FCGX_FFlush(s.fcgx.out); // what the handler wrote goes out; the end of the request does not
  // A close alone is no error to a web server that did not ask to keep the connection: nginx
  // then takes the end of the stream as the end of the response. A record of FastCGI version 0
  // is one no web server accepts: nginx logs "upstream sent unsupported FastCGI protocol
  // version: 0" and ends the client's transfer without its last chunk (curl: "transfer closed
  // with outstanding read data remaining").
  if (!s.source.write_failed) {
    const char cut[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    write_all_until(s.source.fd, cut, sizeof cut, s.source.write_deadline_ns);
  }
  FCGX_Free(&s.fcgx, 1);
  libfcgi_io::unregister_source(&s.source);
  s.fcgx.ipcFd = -1;
  s.active = false;
}

} // namespace fcgi_host
