// libFuzzer target: what reaches the handler. Each request the record guard lets through is
// parsed by the real libfcgi through the host's replaced OS_Read (as in libfcgi_io::self_test: a
// socketpair, a Source attached, FCGX_Accept_r), copied into app::Request with copy_request, and
// answered with write_response (or streamed through StreamSink) to libfcgi's output stream.
// Checks: libfcgi accepts every request the guard accepted; the body arrives whole; the output is
// whole records of that request ending with FCGI_END_REQUEST; the CGI head has no stray CR or LF.
#include "fuzz_common.hpp"

#include "fcgi_host/protocol/libfcgi_io.hpp"
#include "fcgi_host/protocol/request_adapter.hpp"
#include "process_manager/clock.hpp"

#include <fcgiapp.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {

struct Fixture {
  int pair[2] = {-1, -1};
  FCGX_Request fcgx{};
  app::Request request;
  app::Response response;
  std::string output;

  Fixture() {
    if (FCGX_Init() != 0) fuzz::fail("FCGX_Init() failed", __FILE__, __LINE__);
    FCGX_InitRequest(&fcgx, -1, 0);
    if (!fcgi_host::libfcgi_io::self_test())
      fuzz::fail("libfcgi does not use the host's OS_Read (not replaced)", __FILE__, __LINE__);
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) != 0)
      fuzz::fail("socketpair", __FILE__, __LINE__);
    int big = 4 << 20;
    setsockopt(pair[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof big);
    setsockopt(pair[1], SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  }

  void drain() {
    output.clear();
    char buf[65536];
    for (;;) {
      ssize_t n = ::read(pair[1], buf, sizeof buf);
      if (n <= 0) break;
      output.append(buf, static_cast<std::size_t>(n));
    }
  }
};

Fixture& fixture() {
  static Fixture f;
  return f;
}

// The CGI head: "Status: NNN reason\r\n", "Name: value\r\n" lines, "\r\n"; no CR or LF elsewhere.
void check_head(std::string_view stdout_bytes) {
  FUZZ_CHECK(stdout_bytes.starts_with("Status: "));
  std::size_t end = stdout_bytes.find("\r\n\r\n");
  FUZZ_CHECK(end != std::string_view::npos);
  std::string_view head = stdout_bytes.substr(0, end + 2);
  while (!head.empty()) {
    std::size_t eol = head.find("\r\n");
    FUZZ_CHECK(eol != std::string_view::npos);
    std::string_view line = head.substr(0, eol);
    FUZZ_CHECK(line.find_first_of("\r\n") == std::string_view::npos);
    FUZZ_CHECK(line.find(": ") != std::string_view::npos);
    head.remove_prefix(eol + 2);
  }
}

void serve(const fcgi_host::RecordGuard& g, std::string_view bytes) {
  if (g.aborted()) return; // the worker answers END_REQUEST itself; libfcgi never sees it
  Fixture& f = fixture();
  namespace io = fcgi_host::libfcgi_io;
  io::Source source;
  source.fd = f.pair[0];
  source.data = bytes.data();
  source.size = bytes.size();
  source.write_deadline_ns = process_manager::monotonic_ns() + 1'000'000'000;
  io::register_source(&source);
  f.fcgx.ipcFd = f.pair[0];
  f.fcgx.keepConnection = 1;
  int rc = FCGX_Accept_r(&f.fcgx);
  FUZZ_CHECK(rc == 0); // the guard promised a request libfcgi takes
  FUZZ_CHECK(fcgi_host::copy_request(f.fcgx, g.framing(), f.request));
  FUZZ_CHECK(f.request.body().size() == g.body_size());

  // A response built from what the client sent: its header values may hold CR and LF.
  f.response.reset(nullptr);
  f.response.status = 100 + static_cast<int>(g.body_size() % 500);
  f.response.set_header("X-Method", f.request.method());
  f.response.add_header("X-Uri", f.request.uri());
  for (std::size_t i = 0; i < f.request.param_count() && i < 4; ++i) {
    auto p = f.request.param_at(i);
    f.response.add_header(p.name, p.value);
  }
  fcgi_host::StreamSink sink(f.fcgx.out);
  if (g.body_size() % 2) { // streamed in two chunks
    f.response.reset(&sink);
    std::string_view body = f.request.body();
    f.response.write(body.substr(0, body.size() / 2));
    f.response.write(body.substr(body.size() / 2));
  } else {
    f.response.body = f.request.body();
    fcgi_host::write_response(f.response, f.fcgx.out);
  }
  FCGX_Finish_r(&f.fcgx);
  io::unregister_source(&source);
  FUZZ_CHECK(!source.write_failed);
  FUZZ_CHECK(source.closed_by_libfcgi == !g.keep_connection());

  f.drain();
  auto records = fuzz::whole_records(f.output);
  FUZZ_CHECK(!records.empty());
  std::string out;
  for (std::size_t i = 0; i < records.size(); ++i) {
    const auto& r = records[i];
    FUZZ_CHECK(r.header.version == fcgi_host::records::kVersion &&
               r.header.request_id == g.request_id());
    if (i + 1 == records.size()) {
      fcgi_host::records::EndRequest end;
      FUZZ_CHECK(r.header.is(fuzz::Type::EndRequest) &&
                 fcgi_host::records::decode_end_request(r.content, end));
      FUZZ_CHECK(end.protocol_status ==
                 static_cast<std::uint8_t>(fcgi_host::records::ProtocolStatus::RequestComplete));
    } else {
      FUZZ_CHECK(r.header.is(fuzz::Type::Stdout));
      out.append(r.content);
    }
  }
  check_head(out);
  FUZZ_CHECK(out.ends_with(f.request.body()));
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const fcgi_host::RequestLimits limits = fuzz::small_limits();
  fixture();
  fuzz::feed(data, size, limits, serve);
  return 0;
}
