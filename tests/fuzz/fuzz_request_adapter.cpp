// libFuzzer target: what reaches the handler. Each request the record guard lets through is
// decoded three times, by the host's decoder (request_decoder.hpp), by a plain record walk
// (tests/support/walked_decoder.hpp) and by libfcgi, the reference (reference_decoder.hpp:
// FCGX_Accept_r through the host's OS_Read), which must agree on the verdict, the params and
// the body; then the worker's codec (RequestCodec) decodes it into
// app::Request and answers with a buffered or a streamed response through libfcgi's writer over
// a socketpair. Checks besides: libfcgi accepts every request the guard accepted; the body
// arrives whole; the output is whole records of that request ending with FCGI_END_REQUEST; the
// CGI head has no stray CR or LF.
#include "fuzz_common.hpp"

#include "app/response.hpp"

#include "fcgi_host/protocol/reference_decoder.hpp"
#include "fcgi_host/protocol/request_codec.hpp"
#include "fcgi_host/protocol/request_decoder.hpp"
#include "process_manager/clock.hpp"

#include "../support/walked_decoder.hpp"

#include <sys/socket.h>
#include <unistd.h>

namespace {

struct Fixture {
  int pair[2] = {-1, -1};
  fcgi_host::RequestCodec codec;
  fcgi_host::DecodedRequest decoded;
  app::Request request;
  app::Response response;
  std::string output;

  Fixture() {
    std::string error;
    if (!fcgi_host::RequestCodec::init_library(error))
      fuzz::fail(error.c_str(), __FILE__, __LINE__);
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

// The host's decoder against libfcgi's, on the same bytes.
void compare_decoders(std::string_view bytes, const fcgi_host::RequestFraming& framing) {
  const fcgi_host::ScannedParams* scanned = framing.params;
  Fixture& f = fixture();
  fcgi_host::ReferenceRequest reference = fcgi_host::decode_with_libfcgi(bytes);
  std::string copy(bytes);
  test_support::WalkedRequest walked;
  bool whole = test_support::walk_request(copy.data(), copy.size(), 0, walked) ==
               test_support::WalkStatus::Whole;
  FUZZ_CHECK(whole == reference.accepted);
  FUZZ_CHECK(reference.accepted); // the guard promised a request libfcgi takes
  FUZZ_CHECK(!reference.params.empty() && reference.params[0].first == "FCGI_ROLE");
  FUZZ_CHECK(reference.params.size() == walked.params.size() + 1);
  for (std::size_t i = 0; i < walked.params.size(); ++i) {
    FUZZ_CHECK(reference.params[i + 1].first == walked.params[i].name);
    FUZZ_CHECK(reference.params[i + 1].second == walked.params[i].value);
  }
  std::string body;
  for (std::string_view chunk : walked.body)
    body += chunk;
  FUZZ_CHECK(body == reference.body);
  FUZZ_CHECK(scanned != nullptr);
  // The worker's path: from where the guard found the records, with its one pass's params.
  std::string third(bytes);
  FUZZ_CHECK(fcgi_host::decode_guarded_request(third.data(), third.size(), framing, f.decoded) ==
             fcgi_host::DecodeStatus::Whole);
  FUZZ_CHECK(reference.params.size() == f.decoded.param_count() + 1);
  for (std::size_t i = 0; i < f.decoded.param_count(); ++i) {
    FUZZ_CHECK(reference.params[i + 1].first == f.decoded.param(i).name);
    FUZZ_CHECK(reference.params[i + 1].second == f.decoded.param(i).value);
  }
  std::string guarded_body;
  for (std::string_view chunk : f.decoded.body)
    guarded_body += chunk;
  FUZZ_CHECK(guarded_body == reference.body);
}

void serve(const fcgi_host::RecordGuard& g, std::string_view bytes) {
  if (g.aborted()) return; // the worker answers END_REQUEST itself; no decoder sees it
  Fixture& f = fixture();
  compare_decoders(bytes, g.framing());
  std::string request_bytes(bytes); // the codec's views point into it until the request ends
  auto decoded = f.codec.decode(f.pair[0], request_bytes.data(), request_bytes.size(), g.framing(),
                                process_manager::monotonic_ns() + 1'000'000'000, f.request);
  FUZZ_CHECK(decoded == fcgi_host::RequestCodec::Decoded::Whole);
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
  if (g.body_size() % 2) { // streamed in two chunks
    f.response.reset(&f.codec.sink());
    std::string_view body = f.request.body();
    f.response.write(body.substr(0, body.size() / 2));
    f.response.write(body.substr(body.size() / 2));
  } else {
    f.response.body = f.request.body();
    f.codec.send(f.response, nullptr);
  }
  auto ending = f.codec.finish();
  FUZZ_CHECK(ending == (g.keep_connection() ? fcgi_host::RequestCodec::Ending::Kept
                                            : fcgi_host::RequestCodec::Ending::Closed));

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
  // A header that is none (CR, LF, NUL in a value; a name that is not a token) is refused whole
  // with a 500; 1xx, 204 and 304 carry no body; otherwise the body follows the head.
  const bool refused = out.starts_with("Status: 500 Internal Server Error\r\nContent-Type: "
                                       "text/plain\r\nContent-Length: 22\r\n\r\n");
  if (!refused && !app::status_without_content(f.response.status))
    FUZZ_CHECK(out.ends_with(f.request.body()));
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const fcgi_host::RequestLimits limits = fuzz::small_limits();
  fixture();
  fuzz::feed(data, size, limits, serve);
  return 0;
}
