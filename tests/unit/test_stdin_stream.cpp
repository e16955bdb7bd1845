// StdinStream: the STDIN records of a streamed body taken apart record by record, whatever the
// pieces the bytes arrive in; the guard's checks of a body (id, --max-body, CONTENT_LENGTH) once
// per record.
#include "fcgi_host/protocol/stdin_stream.hpp"
#include "fcgi_host/testing/fcgi_test_client.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <string>

using fcgi_host::StdinStream;
using fcgi_test::RecordType;
using State = StdinStream::State;

namespace {

struct Result {
  std::string body;
  State state = State::Framing;
  std::size_t used = 0; // bytes of the input the stream took
};

// Feeds `bytes` in pieces of `piece` bytes, as a reader would: framing through take_framing(),
// content copied out up to content_left().
Result run(const std::string& bytes, std::size_t piece, StdinStream::Start start) {
  StdinStream s(start);
  Result r;
  std::size_t at = 0;
  while (at < bytes.size() && !s.done()) {
    const std::size_t avail = std::min(piece, bytes.size() - at);
    std::size_t used = s.take_framing(bytes.data() + at, avail);
    if (used == 0 && s.state() == State::Content) {
      used = std::min(avail, s.content_left());
      r.body.append(bytes, at, used);
      s.took_content(used);
    }
    at += used;
  }
  r.state = s.state();
  r.used = at;
  return r;
}

StdinStream::Start start(long long content_length = -1, std::size_t max_body = 1 << 20) {
  return {1, 0, content_length, max_body};
}

std::string body_of(std::size_t n) {
  std::string b(n, '\0');
  for (std::size_t i = 0; i < n; ++i)
    b[i] = static_cast<char>('a' + i % 26);
  return b;
}

} // namespace

TEST_SUITE("stdin stream") {

  TEST_CASE("a body in records of any size, fed in pieces of any size, comes out whole") {
    const std::string body = body_of(100'000);
    for (std::size_t record : {1ul, 7ul, 8192ul, 65535ul})
      for (std::size_t piece : {1ul, 3ul, 8ul, 4096ul, 200'000ul}) {
        if (record == 1 && piece > 8)
          continue; // 100 000 one-byte records, fed in big pieces:
                    // the same path as 1-byte pieces, only slower
        const std::string wire = fcgi_test::encode_stream(RecordType::Stdin, 1, body, record);
        Result r = run(wire, piece, start(static_cast<long long>(body.size())));
        CAPTURE(record);
        CAPTURE(piece);
        CHECK(r.state == State::End);
        CHECK(r.body == body);
        CHECK(r.used == wire.size());
      }
  }

  TEST_CASE("padding is skipped, also on the empty record, what follows the body is left") {
    std::string wire = fcgi_test::encode_record(RecordType::Stdin, 1, "hello", 3);
    wire += fcgi_test::encode_record(RecordType::Stdin, 1, "", 5);
    const std::size_t end = wire.size();
    wire += "NEXT REQUEST";
    for (std::size_t piece : {1ul, 2ul, 100ul}) {
      Result r = run(wire, piece, start(5));
      CHECK(r.state == State::End);
      CHECK(r.body == "hello");
      CHECK(r.used == end);
    }
  }

  TEST_CASE("over --max-body: refused with 413 at the record that passes it") {
    const std::string wire = fcgi_test::encode_stream(RecordType::Stdin, 1, body_of(5000), 1000);
    Result r = run(wire, 4096, start(-1, 2500));
    CHECK(r.state == State::Refused);
    CHECK(r.body.size() == 2000); // the records before it
    CHECK(run(wire, 1, start(-1, 2500)).body.size() == 2000);
    CHECK(run(wire, 1, start(-1, 5000)).state == State::End);
  }

  TEST_CASE("the body counts what the guard took before the stream began") {
    const std::string wire = fcgi_test::encode_stream(RecordType::Stdin, 1, body_of(1000));
    StdinStream::Start st{1, 2000, -1, 2500};
    CHECK(run(wire, 64, st).state == State::Refused);
    st.body_so_far = 1000;
    CHECK(run(wire, 64, st).state == State::End);
  }

  TEST_CASE("a body longer or shorter than CONTENT_LENGTH is refused with 400") {
    const std::string wire = fcgi_test::encode_stream(RecordType::Stdin, 1, body_of(100));
    CHECK(run(wire, 7, start(50)).state == State::Refused);
    CHECK(run(wire, 7, start(150)).state == State::Refused);
    CHECK(run(wire, 7, start(100)).state == State::End);
  }

  TEST_CASE("an abort of the request ends it, another request's record breaks the stream") {
    std::string wire = fcgi_test::encode_record(RecordType::Stdin, 1, "abc");
    CHECK(run(wire + fcgi_test::encode_record(RecordType::AbortRequest, 1, ""), 1, start()).state ==
          State::Aborted);
    CHECK(run(wire + fcgi_test::encode_record(RecordType::Stdin, 2, "x"), 1, start()).state ==
          State::Broken);
    CHECK(run(wire + fcgi_test::encode_record(RecordType::Params, 1, "x"), 1, start()).state ==
          State::Broken);
  }

  TEST_CASE("a management record in the middle of the body is dropped") {
    std::string wire = fcgi_test::encode_record(RecordType::Stdin, 1, "abc");
    wire += fcgi_test::encode_record(RecordType::GetValues, 0, fcgi_test::encode_params({}), 4);
    wire += fcgi_test::encode_stream(RecordType::Stdin, 1, "def");
    Result r = run(wire, 3, start(6));
    CHECK(r.state == State::End);
    CHECK(r.body == "abcdef");
  }

  TEST_CASE("another version is a broken stream") {
    std::string wire = fcgi_test::encode_record(0x0b, 1, "abc", 0, 2);
    CHECK(run(wire, 8, start()).state == State::Broken);
  }
}
