// libFuzzer target: the record guard alone, fed a byte stream in chunks (the first input bytes
// pick the chunk sizes), with small limits, the way the worker feeds it. Checks after every step:
// the request range lies within the buffer, the buffer never grows past what the limits allow,
// every reply is a whole well-formed record of a type the guard may send, replies stay small,
// and each ready request is exactly BEGIN, PARAMS..., empty PARAMS, STDIN..., empty STDIN.
// The same bytes also go through the codec's record reader (in the same chunks) and its
// name-value decoder: the reader frames the same records whatever the cut, and no decoded pair
// lies outside its record. And the guard's outcome does not depend on the cut either: the input
// whole (where the guard takes the usual request in one step) and byte by byte (record by
// record) give the same requests, answers and end.
// The same bytes are also read as a streamed body (StdinStream, as the worker's body reader
// takes it): whole and in the chunks, the same content, end state and bytes taken, and never
// more content than --max-body or bytes than were given.
#include "fcgi_host/protocol/stdin_stream.hpp"
#include "fuzz_common.hpp"

#include <algorithm>
#include <string>

namespace {

void check_codec(const std::uint8_t* data, std::size_t size) {
  fuzz::Chunker chunker(data, size);
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::string_view whole = input; // framed at once, as the reference
  fcgi_host::records::RecordReader reader;
  for (std::size_t at = 0; at < input.size();) {
    std::size_t n = chunker.next(input.size() - at);
    reader.append(input.substr(at, n));
    at += n;
    for (fcgi_host::records::RecordView r; reader.next(r);) {
      fcgi_host::records::RecordView expected;
      FUZZ_CHECK(fcgi_host::records::take_record(whole, expected));
      FUZZ_CHECK(r.header.type == expected.header.type && r.content == expected.content &&
                 r.header.padding == expected.header.padding);
      std::string_view pairs = r.content;
      for (fcgi_host::records::NameValue pair;;) {
        std::size_t before = pairs.size();
        auto status = fcgi_host::records::next_name_value(pairs, pair);
        if (status != fcgi_host::records::PairStatus::Pair) {
          FUZZ_CHECK(pairs.size() == before);
          break;
        }
        FUZZ_CHECK(pair.name.size() + pair.value.size() + 2 <= before - pairs.size());
        FUZZ_CHECK(pair.name.data() >= r.content.data() &&
                   pair.value.data() + pair.value.size() <= r.content.data() + r.content.size());
      }
    }
  }
  fcgi_host::records::RecordView extra;
  FUZZ_CHECK(!fcgi_host::records::take_record(whole, extra));
  FUZZ_CHECK(reader.rest() == whole);
}

// What a connection fed `input` comes to, in `chunk`-byte reads (0: all at once): each request
// handed on (its bytes and its framing), every answer, and the verdict that ended it.
std::string outcome(std::string_view input, std::size_t chunk,
                    const fcgi_host::RequestLimits& limits) {
  using fcgi_host::RecordGuard;
  RecordGuard g(limits, fcgi_host::ServerValues{256, 2});
  fcgi_host::ByteBuffer in;
  std::string replies, out;
  auto number = [&out](std::size_t n) { out.append(std::to_string(n)).append(","); };
  for (std::size_t at = 0; at < input.size();) {
    const std::size_t n = chunk ? std::min(chunk, input.size() - at) : input.size();
    in.reserve_more(n);
    std::memcpy(in.tail(), input.data() + at, n);
    in.size() += n;
    at += n;
    for (;;) {
      const RecordGuard::Verdict v = g.advance(in.data(), in.size(), replies);
      out.append(replies); // as one stream: the cut decides how many calls they take
      replies.clear();
      if (v == RecordGuard::Verdict::NeedMore) break;
      if (v != RecordGuard::Verdict::RequestReady) {
        out.append(v == RecordGuard::Verdict::Reject ? "J" : "C");
        number(static_cast<std::size_t>(g.error_status()));
        return out.append(g.close_reason());
      }
      const fcgi_host::RequestFraming f = g.framing();
      out.append("R").append(in.data() + g.request_begin(), g.request_end() - g.request_begin());
      for (std::size_t x : {f.body_size, std::size_t{f.length_declared},
                            std::size_t{f.params && f.params->repeated}, std::size_t{f.request_id},
                            std::size_t{f.keep_conn}, std::size_t{g.aborted()},
                            f.params ? f.params->spans().size() : 9999})
        number(x);
      for (std::size_t x : f.params_records)
        number(x);
      out.append(";");
      for (std::size_t x : f.stdin_records)
        number(x);
      in.consume_front(g.request_end());
      g.consume_request();
    }
  }
  return out;
}

struct StreamOutcome {
  std::string body;
  fcgi_host::StdinStream::State state;
  std::size_t used = 0;
};

// piece 0: all at once.
StreamOutcome read_stream(std::string_view input, std::size_t piece) {
  fcgi_host::StdinStream s({1, 0, input.size() % 3 == 0 ? -1 : 300, 1000});
  StreamOutcome o;
  while (o.used < input.size() && !s.done()) {
    const std::size_t avail =
        piece ? std::min(piece, input.size() - o.used) : input.size() - o.used;
    std::size_t n = s.take_framing(input.data() + o.used, avail);
    if (n == 0 && s.state() == fcgi_host::StdinStream::State::Content) {
      n = std::min(avail, s.content_left());
      o.body.append(input.substr(o.used, n));
      s.took_content(n);
    }
    FUZZ_CHECK(n > 0 || s.done());
    o.used += n;
  }
  FUZZ_CHECK(o.body.size() <= 1000 && o.used <= input.size());
  o.state = s.state();
  return o;
}

void check_stdin_stream(std::string_view input) {
  const StreamOutcome whole = read_stream(input, 0);
  for (std::size_t piece : {1, 3, 64}) {
    const StreamOutcome cut = read_stream(input, piece);
    FUZZ_CHECK(cut.state == whole.state && cut.body == whole.body && cut.used == whole.used);
  }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const fcgi_host::RequestLimits limits = fuzz::small_limits();
  fuzz::feed(data, size, limits, [](const fcgi_host::RecordGuard&, std::string_view) {});
  check_codec(data, size);
  std::string_view input(reinterpret_cast<const char*>(data), size);
  check_stdin_stream(input);
  const std::string at_once = outcome(input, 0, limits), by_bytes = outcome(input, 1, limits);
  if (at_once != by_bytes) {
    auto show = [](const std::string& o) {
      std::string v;
      for (unsigned char c : o)
        v +=
            (c >= 32 && c < 127) ? std::string(1, static_cast<char>(c)) : "\\x" + std::to_string(c);
      return v;
    };
    std::fprintf(stderr, "at once:      %s\nbyte by byte: %s\n", show(at_once).c_str(),
                 show(by_bytes).c_str());
  }
  FUZZ_CHECK(at_once == by_bytes);
  return 0;
}
