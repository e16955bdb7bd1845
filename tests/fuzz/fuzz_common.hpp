#pragma once
// Shared by the fuzz targets: feeding an input to a RecordGuard the way the worker does (a byte
// stream arriving in chunks, management records answered, one request at a time handed on), and
// the invariants checked after every step. An invariant that fails aborts, so libFuzzer keeps
// the input as a crash.
#include "fcgi_host/protocol/byte_buffer.hpp"
#include "fcgi_host/protocol/record_guard.hpp"
#include "fcgi_host/protocol/records.hpp"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#define FUZZ_CHECK(cond)                                                                           \
  do {                                                                                             \
    if (!(cond)) fuzz::fail(#cond, __FILE__, __LINE__);                                            \
  } while (0)

namespace fuzz {

namespace records = fcgi_host::records;
using records::Type;

[[noreturn]] inline void fail(const char* what, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: invariant broken: %s\n", file, line, what);
  std::abort();
}

// Small limits, so that the fuzzer reaches every refusal with short inputs.
inline fcgi_host::RequestLimits small_limits() {
  fcgi_host::RequestLimits l;
  l.max_body = 4096;
  l.max_params_size = 1024;
  l.max_params = 16;
  l.max_records = 64;
  l.max_management_records = 32;
  return l;
}

// The most a connection may hold in its buffer while the guard says NeedMore: the whole head
// and body within their limits, the headers and padding of every record allowed, one more
// record being read (its header is checked only once it is whole), and one read chunk.
inline std::size_t buffer_bound(const fcgi_host::RequestLimits& l, std::size_t chunk) {
  constexpr std::size_t kRecordOverhead = records::kHeaderSize + 255;
  return l.max_params_size + l.max_body + (l.max_records + 2) * kRecordOverhead + 65535 +
         kRecordOverhead + chunk;
}

// Splits bytes that must be whole records; aborts on anything else.
inline std::vector<records::RecordView> whole_records(std::string_view bytes) {
  std::vector<records::RecordView> out;
  for (records::RecordView r; !bytes.empty(); out.push_back(r))
    FUZZ_CHECK(records::take_record(bytes, r));
  return out;
}

// What the guard answers by itself: management answers (id 0) and FCGI_END_REQUEST.
inline void check_replies(std::string_view replies) {
  for (const records::RecordView& r : whole_records(replies)) {
    FUZZ_CHECK(r.header.version == records::kVersion);
    const std::uint16_t id = r.header.request_id;
    switch (static_cast<Type>(r.header.type)) {
    case Type::UnknownType:
      FUZZ_CHECK(id == 0 && r.content.size() == 8);
      break;
    case Type::GetValuesResult: {
      FUZZ_CHECK(id == 0);
      FUZZ_CHECK(r.content.size() <= 64); // each of the three variables at most once
      std::vector<records::NameValue> pairs;
      FUZZ_CHECK(records::decode_name_values(r.content, pairs) && pairs.size() <= 3);
      break;
    }
    case Type::EndRequest: {
      records::EndRequest end;
      FUZZ_CHECK(id != 0 && r.content.size() == 8 && records::decode_end_request(r.content, end));
      using records::ProtocolStatus;
      FUZZ_CHECK(end.protocol_status == static_cast<std::uint8_t>(ProtocolStatus::CantMpxConn) ||
                 end.protocol_status == static_cast<std::uint8_t>(ProtocolStatus::UnknownRole));
      break;
    }
    default:
      FUZZ_CHECK(!"a reply of an unexpected type");
    }
  }
}

// [begin, end) of a ready request: BEGIN_REQUEST, PARAMS records ending with an empty one,
// STDIN records ending with an empty one, all version 1 and of the request's id, the STDIN
// content adding up to body_size(). Nothing else (management records and aborts were taken out).
inline void check_request(const fcgi_host::RecordGuard& g, std::string_view request) {
  auto records = whole_records(request);
  FUZZ_CHECK(records.size() >= (g.aborted() ? 1u : 3u));
  const records::RecordView& begin = records.front();
  FUZZ_CHECK(begin.header.is(Type::BeginRequest) && begin.content.size() == 8);
  // libfcgi 2.4.2 reads the padding of these two as a header: the guard must have removed it.
  FUZZ_CHECK(begin.header.padding == 0);
  records::BeginRequest body;
  FUZZ_CHECK(records::decode_begin_request(begin.content, body));
  FUZZ_CHECK(body.role == static_cast<std::uint16_t>(records::Role::Responder));
  enum { Params, Stdin, Done } phase = Params;
  std::size_t body_size = 0;
  for (std::size_t i = 1; i < records.size(); ++i) {
    const records::RecordView& r = records[i];
    FUZZ_CHECK(r.header.version == records::kVersion && r.header.request_id == g.request_id());
    FUZZ_CHECK(phase != Done);
    if (phase == Params) {
      FUZZ_CHECK(r.header.is(Type::Params));
      if (r.content.empty()) {
        FUZZ_CHECK(r.header.padding == 0);
        phase = Stdin;
      }
    } else {
      FUZZ_CHECK(r.header.is(Type::Stdin));
      body_size += r.content.size();
      if (r.content.empty()) phase = Done;
    }
  }
  // An abort makes the request ready before its end; the worker then runs no handler.
  FUZZ_CHECK(phase == Done || g.aborted());
  FUZZ_CHECK(body_size == g.body_size());
}

// Cuts the input into the chunks a socket might deliver: the first byte says how many of the
// following bytes give chunk sizes (0: the whole input at once).
class Chunker {
public:
  Chunker(const std::uint8_t*& data, std::size_t& size) {
    if (size == 0) return;
    std::size_t n = data[0] % 8;
    ++data, --size;
    for (std::size_t i = 0; i < n && size > 0; ++i, ++data, --size)
      sizes_.push_back(static_cast<std::size_t>(data[0]) * 7 + 1);
  }
  std::size_t next(std::size_t left) {
    if (sizes_.empty()) return left;
    std::size_t n = sizes_[i_++ % sizes_.size()];
    return n < left ? n : left;
  }
  std::size_t largest() const {
    std::size_t m = 16 * 1024;
    for (std::size_t s : sizes_)
      m = s > m ? s : m;
    return m;
  }

private:
  std::vector<std::size_t> sizes_;
  std::size_t i_ = 0;
};

// Feeds the input to a guard as the worker does, calling serve(guard, request bytes) for each
// request that becomes ready. Returns the verdict that ended the connection (NeedMore when the
// input ran out first).
template <class Serve>
fcgi_host::RecordGuard::Verdict feed(const std::uint8_t* data, std::size_t size,
                                     const fcgi_host::RequestLimits& limits, Serve&& serve) {
  using fcgi_host::RecordGuard;
  Chunker chunker(data, size);
  fcgi_host::ServerValues values{256, 2};
  RecordGuard g(limits, values);
  fcgi_host::ByteBuffer in;
  std::string replies;
  const std::size_t total_input = size;
  std::size_t total_replies = 0;
  const std::size_t bound = buffer_bound(limits, chunker.largest());
  while (size > 0) {
    std::size_t n = chunker.next(size);
    in.reserve_more(n);
    std::memcpy(in.tail(), data, n);
    in.size() += n;
    data += n;
    size -= n;
    for (;;) {
      std::size_t before = in.size();
      RecordGuard::Verdict v = g.advance(in.data(), in.size(), replies);
      FUZZ_CHECK(in.size() <= before);
      check_replies(replies);
      total_replies += replies.size();
      // An answer costs at most twice the bytes that asked for it (UNKNOWN_TYPE: 16 for 8).
      FUZZ_CHECK(total_replies <= 2 * total_input + 16);
      replies.clear();
      switch (v) {
      case RecordGuard::Verdict::RequestReady: {
        FUZZ_CHECK(g.request_begin() <= g.request_end());
        FUZZ_CHECK(g.request_end() <= in.size());
        FUZZ_CHECK(g.in_request() && (g.params_done() || g.aborted()));
        std::size_t begin = g.request_begin(), end = g.request_end();
        check_request(g, std::string_view(in.data() + begin, end - begin));
        // The worker looks again while the handler runs (Request::aborted()): only an abort
        // of this request may be taken then; the request stays where it is.
        std::size_t kept = in.size();
        FUZZ_CHECK(g.advance(in.data(), in.size(), replies) == RecordGuard::Verdict::RequestReady);
        FUZZ_CHECK(replies.empty());
        FUZZ_CHECK(g.request_begin() == begin && g.request_end() == end && in.size() <= kept);
        serve(g, std::string_view(in.data() + begin, end - begin));
        in.consume_front(end);
        g.consume_request();
        continue;
      }
      case RecordGuard::Verdict::Reject:
        FUZZ_CHECK(g.error_status() == 400 || g.error_status() == 413);
        FUZZ_CHECK(g.in_request());
        FUZZ_CHECK(!g.close_reason().empty());
        return v;
      case RecordGuard::Verdict::Close:
        FUZZ_CHECK(!g.close_reason().empty());
        return v;
      case RecordGuard::Verdict::NeedMore:
        FUZZ_CHECK(in.size() <= bound);
        break;
      }
      break;
    }
  }
  return RecordGuard::Verdict::NeedMore;
}

} // namespace fuzz
