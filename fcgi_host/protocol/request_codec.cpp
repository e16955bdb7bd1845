#include "fcgi_host/protocol/request_codec.hpp"

#include "fcgi_host/protocol/libfcgi_io.hpp"
#include "fcgi_host/protocol/request_adapter.hpp"
#include "fcgi_host/protocol/request_decoder.hpp"

#include <csignal>
#include <fcgiapp.h>
#include <mutex>
#include <vector>

namespace fcgi_host {
namespace {

// libfcgi's own buffer size for FCGX_Accept_r's writers (LARGE_BUFF): the same records as before.
constexpr int kWriterBuffer = 8192;

// A libfcgi response writer and the key libfcgi knows its connection by (libfcgi_io.hpp).
struct Writer {
  FCGX_Stream* stream = nullptr;
  int key = -1;
};

// Writers are made once and never freed: FCGX_FreeStream would leak the request record that
// FCGX_CreateWriter allocated for it (libfcgi says so), so a codec that goes away leaves its
// writer here for the next one. The pool itself is never destroyed (still reachable at exit).
struct WriterPool {
  std::mutex mutex;
  std::vector<Writer> idle;
};
// FCGX_Init installs handlers for TERM and USR1 that only set a flag of libfcgi's own, which
// the host never reads. In a worker, a stop sent in the moment before its signalfd blocks TERM
// would vanish into that flag, and the worker would wait on forever; in a program embedding the
// in-process host, TERM would stop stopping it. So the process keeps its own dispositions.
// (libfcgi's SIGPIPE ignore stays: a peer that has gone must not kill a writer.)
int init_keeping_signal_dispositions() {
  struct sigaction term {
  }, usr1{};
  sigaction(SIGTERM, nullptr, &term);
  sigaction(SIGUSR1, nullptr, &usr1);
  int rc = FCGX_Init();
  sigaction(SIGTERM, &term, nullptr);
  sigaction(SIGUSR1, &usr1, nullptr);
  return rc;
}

WriterPool& writer_pool() {
  static auto* pool = new WriterPool;
  return *pool;
}

Writer take_writer() {
  WriterPool& pool = writer_pool();
  {
    std::lock_guard lock(pool.mutex);
    if (!pool.idle.empty()) {
      Writer w = pool.idle.back();
      pool.idle.pop_back();
      return w;
    }
  }
  Writer w;
  w.key = libfcgi_io::writer_key();
  // Request id 1: OS_Write puts the id of each request into its records.
  w.stream = FCGX_CreateWriter(w.key, 1, kWriterBuffer, static_cast<int>(records::Type::Stdout));
  return w;
}

void give_back(Writer w) {
  if (!w.stream) return;
  WriterPool& pool = writer_pool();
  std::lock_guard lock(pool.mutex);
  pool.idle.push_back(w);
}

} // namespace

struct RequestCodec::State {
  Writer writer;
  libfcgi_io::Source source;
  StreamSink sink{nullptr};
  DecodedRequest decoded;
  std::string ending; // the empty STDOUT record and FCGI_END_REQUEST, reused
  std::size_t head_limit = static_cast<std::size_t>(-1);
  std::size_t refused_head = 0; // of the buffered response
  bool active = false;          // decoded, not yet finished or aborted
  bool keep = false;            // FCGI_KEEP_CONN
};

RequestCodec::RequestCodec() : state_(std::make_unique<State>()) {}

RequestCodec::~RequestCodec() {
  if (state_->active) abort();
  give_back(state_->writer);
}

bool RequestCodec::init_library(std::string& error) {
  // Once per process: FCGX_Init is not thread-safe (two in-process hosts starting together
  // would both set libfcgi up, and one set-up would leak).
  static std::once_flag once;
  static std::string failure;
  std::call_once(once, [] {
    if (init_keeping_signal_dispositions() != 0)
      failure = "FCGX_Init() failed";
    else if (!libfcgi_io::self_test())
      failure = "libfcgi does not use the host's socket I/O (OS_Read/OS_Write were not "
                "replaced); refusing to serve with libfcgi's own I/O";
  });
  error = failure;
  return failure.empty();
}

RequestCodec::Decoded RequestCodec::decode(int fd, char* records, std::size_t size,
                                           const RequestFraming& framing,
                                           std::uint64_t write_deadline_ns, app::Request& request) {
  State& s = *state_;
  // The guard makes a request ready with its params scanned (an abort is answered before).
  if (!framing.params ||
      decode_guarded_request(records, size, framing, s.decoded) != DecodeStatus::Whole ||
      s.decoded.role != static_cast<std::uint16_t>(records::Role::Responder))
    return Decoded::Refused;
  if (!s.writer.stream) s.writer = take_writer();
  if (!s.writer.stream) return Decoded::Refused;
  s.source = libfcgi_io::Source{};
  s.source.fd = fd;
  s.source.request_id = s.decoded.id;
  s.source.write_deadline_ns = write_deadline_ns;
  libfcgi_io::register_source(s.writer.key, &s.source);
  s.keep = s.decoded.keep_conn;
  s.active = true;
  s.refused_head = 0;
  s.sink.attach(s.writer.stream, &s.source.write_failed);
  return fill_request(s.decoded, framing, request) ? Decoded::Whole : Decoded::ShortBody;
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
  state_->refused_head = write_response(response, state_->writer.stream, state_->head_limit);
}

RequestCodec::Ending RequestCodec::finish() {
  State& s = *state_;
  // The last STDOUT record libfcgi holds and the end of the request, in one write.
  s.ending.clear();
  s.source.gather = &s.ending;
  FCGX_FFlush(s.writer.stream);
  s.source.gather = nullptr;
  records::append_response_end(s.ending, s.decoded.id);
  libfcgi_io::write_to_client(s.source, s.ending.data(), s.ending.size());
  libfcgi_io::unregister_source(s.writer.key, &s.source);
  s.active = false;
  if (s.source.write_failed) return Ending::WriteFailed;
  return s.keep ? Ending::Kept : Ending::Closed;
}

void RequestCodec::abort() {
  State& s = *state_;
  FCGX_FFlush(s.writer.stream); // what the handler wrote goes out; the end of the request does not
  // A close alone is no error to a web server that did not ask to keep the connection: nginx
  // then takes the end of the stream as the end of the response. A record of FastCGI version 0
  // is one no web server accepts: nginx logs "upstream sent unsupported FastCGI protocol
  // version: 0" and ends the client's transfer without its last chunk (curl: "transfer closed
  // with outstanding read data remaining").
  const char cut[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  libfcgi_io::write_to_client(s.source, cut, sizeof cut);
  libfcgi_io::unregister_source(s.writer.key, &s.source);
  s.active = false;
}

} // namespace fcgi_host
