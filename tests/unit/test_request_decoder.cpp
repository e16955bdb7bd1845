// The host's request decoder (from where the record guard found the records), held equal to two
// other readings of the same bytes: libfcgi, the reference decoder, and a plain record walk
// (tests/support/walked_decoder.hpp, itself checked here: every param length form, empty
// values, split params, the body, the malformed and over-limit cases).
#include "fcgi_host/protocol/record_guard.hpp"
#include "fcgi_host/protocol/reference_decoder.hpp"
#include "fcgi_host/protocol/request_adapter.hpp"
#include "fcgi_host/protocol/request_codec.hpp"
#include "fcgi_host/protocol/request_decoder.hpp"
#include "support/walked_decoder.hpp"

#include <doctest/doctest.h>

#include <random>
#include <string>
#include <utility>
#include <vector>

using fcgi_host::DecodedRequest;
using fcgi_host::DecodeStatus;
using test_support::WalkedRequest;
using test_support::WalkStatus;
namespace records = fcgi_host::records;
using records::Type;

namespace {

using Pairs = std::vector<std::pair<std::string, std::string>>;

// A request as a web server frames it: BEGIN, the params in records of `chunk` bytes (each with
// `padding`), their empty end, the body likewise, its empty end.
std::string framed(const Pairs& params, const std::string& body, std::size_t chunk = 65535,
                   std::uint8_t padding = 0, std::uint16_t id = 1, std::uint8_t flags = 0) {
  std::string out;
  records::append_begin_request(out, id, records::Role::Responder, flags);
  std::string pairs;
  for (const auto& [n, v] : params)
    records::append_name_value(pairs, n, v);
  records::append_stream(out, Type::Params, id, pairs, chunk, padding);
  records::append_stream(out, Type::Stdin, id, body, chunk, padding);
  return out;
}

struct Decoded {
  WalkStatus status;
  WalkedRequest request;
  std::string bytes; // what the views point into
  std::string why;
};

Decoded decode(std::string bytes, std::size_t max_params = 0) {
  Decoded d{WalkStatus::Malformed, {}, std::move(bytes), {}};
  d.status =
      test_support::walk_request(d.bytes.data(), d.bytes.size(), max_params, d.request, &d.why);
  return d;
}

Pairs params_of(const WalkedRequest& r) {
  Pairs out;
  for (const auto& p : r.params)
    out.emplace_back(std::string(p.name), std::string(p.value));
  return out;
}

template <class Decoded> std::string body_of(const Decoded& r) {
  std::string out;
  for (std::string_view chunk : r.body)
    out += chunk;
  return out;
}

} // namespace

TEST_CASE("decoder: one-byte lengths, empty values and the order sent") {
  Pairs sent{{"REQUEST_METHOD", "GET"}, {"QUERY_STRING", ""}, {"A", "1"}, {"A", "2"}};
  Decoded d = decode(framed(sent, "", 65535, 0, 7, records::kKeepConn));
  REQUIRE(d.status == WalkStatus::Whole);
  CHECK(params_of(d.request) == sent);
  CHECK(d.request.id == 7);
  CHECK(d.request.keep_conn);
  CHECK(d.request.role == static_cast<std::uint16_t>(records::Role::Responder));
  CHECK(d.request.body.empty());
  CHECK(d.request.body_size == 0);
}

TEST_CASE("decoder: the params are views into the buffer, not copies") {
  Decoded d = decode(framed({{"NAME", "value"}}, "body"));
  REQUIRE(d.status == WalkStatus::Whole);
  const char* begin = d.bytes.data();
  const char* end = begin + d.bytes.size();
  CHECK(d.request.params[0].name.data() >= begin);
  CHECK(d.request.params[0].value.data() + 5 <= end);
  CHECK(d.request.body[0].data() >= begin);
}

TEST_CASE("decoder: the 127/128 edge between 1-byte and 4-byte lengths") {
  for (std::size_t n : {0u, 1u, 126u, 127u, 128u, 129u, 255u, 256u, 65535u, 70000u}) {
    CAPTURE(n);
    Pairs sent{{std::string(n ? n : 1, 'N'), std::string(n, 'v')}, {"AFTER", "x"}};
    Decoded d = decode(framed(sent, ""));
    REQUIRE(d.status == WalkStatus::Whole);
    CHECK(params_of(d.request) == sent);
  }
}

TEST_CASE("decoder: a 4-byte length for a short value is read as 4 bytes") {
  // Lengths below 128 may also be sent in the 4-byte form (high bit set).
  std::string pairs;
  pairs += static_cast<char>(1);
  pairs += std::string("\x80\x00\x00\x02", 4);
  pairs += "Kvv";
  std::string bytes;
  records::append_begin_request(bytes, 1, records::Role::Responder);
  records::append_stream(bytes, Type::Params, 1, pairs);
  records::append_stream(bytes, Type::Stdin, 1, {});
  Decoded d = decode(bytes);
  REQUIRE(d.status == WalkStatus::Whole);
  CHECK(params_of(d.request) == Pairs{{"K", "vv"}});
}

TEST_CASE("decoder: params split across records, inside a pair too, are joined in place") {
  Pairs sent;
  for (int i = 0; i < 40; ++i)
    sent.emplace_back("NAME_" + std::to_string(i),
                      std::string(static_cast<std::size_t>(i * 7), 'x'));
  for (std::size_t chunk : {1u, 3u, 8u, 100u, 65535u}) {
    CAPTURE(chunk);
    Decoded d = decode(framed(sent, "the body, also split", chunk, 3));
    REQUIRE(d.status == WalkStatus::Whole);
    CHECK(params_of(d.request) == sent);
    CHECK(body_of(d.request) == "the body, also split");
    CHECK(d.request.body_size == 20);
  }
}

TEST_CASE("decoder: truncated lengths and pairs are malformed") {
  auto with_pairs = [](std::string pairs) {
    std::string bytes;
    records::append_begin_request(bytes, 1, records::Role::Responder);
    records::append_stream(bytes, Type::Params, 1, pairs);
    records::append_stream(bytes, Type::Stdin, 1, {});
    return bytes;
  };
  CHECK(decode(with_pairs(std::string("\x05", 1))).status == WalkStatus::Malformed);
  CHECK(decode(with_pairs(std::string("\x80\x00", 2))).status == WalkStatus::Malformed);
  CHECK(decode(with_pairs(std::string("\x01\x80\x00\x00", 4))).status == WalkStatus::Malformed);
  CHECK(decode(with_pairs(std::string("\x04\x01"
                                      "ABC",
                                      5)))
            .status == WalkStatus::Malformed);
  CHECK(decode(with_pairs(std::string("\x01\x05"
                                      "Avvvv",
                                      7)))
            .status == WalkStatus::Malformed);
  // A value length near 2^31 with a few bytes sent.
  CHECK(decode(with_pairs(std::string("\x01\xff\xff\xff\xff"
                                      "A",
                                      6)))
            .status == WalkStatus::Malformed);
  CHECK(decode(with_pairs(std::string("\x00\x00", 2))).status == WalkStatus::Whole);
}

TEST_CASE("decoder: the record sequence must be one whole request") {
  std::string good = framed({{"A", "1"}}, "xy");
  CHECK(decode(good).status == WalkStatus::Whole);
  for (std::size_t cut : {1u, 7u, 8u, 15u, 16u, 20u})
    CHECK(decode(good.substr(0, good.size() - cut)).status == WalkStatus::Malformed);
  CHECK(decode(good + good).status == WalkStatus::Malformed);
  CHECK(decode(good.substr(16)).status == WalkStatus::Malformed); // no BEGIN_REQUEST
  std::string two_ids = framed({{"A", "1"}}, "");
  two_ids[16 + 3] = 2; // the PARAMS record of request 2
  CHECK(decode(two_ids).status == WalkStatus::Malformed);
  std::string version = good;
  version[16] = 2;
  CHECK(decode(version).status == WalkStatus::Malformed);
  CHECK(decode("").status == WalkStatus::Malformed);
}

TEST_CASE("decoder: --max-params as a limit") {
  Pairs sent{{"A", "1"}, {"B", "2"}, {"C", "3"}};
  CHECK(decode(framed(sent, ""), 3).status == WalkStatus::Whole);
  CHECK(decode(framed(sent, ""), 2).status == WalkStatus::TooManyParams);
}

namespace {

// The three readings on what the guard lets through: the guard sees the bytes as a connection
// would (in pieces of `step`), and each request it makes ready goes to libfcgi, to the record
// walk and to the host's decoder, which must agree on verdict, params and body.
void compare_with_libfcgi(std::string bytes, std::size_t step) {
  fcgi_host::RequestLimits limits;
  fcgi_host::RecordGuard guard(limits, fcgi_host::ServerValues{});
  std::string buffer, replies;
  std::size_t fed = 0;
  int requests = 0;
  while (fed < bytes.size() || !buffer.empty()) {
    std::size_t n = std::min(step, bytes.size() - fed);
    buffer.append(bytes, fed, n);
    fed += n;
    std::size_t size = buffer.size();
    auto verdict = guard.advance(buffer.data(), size, replies);
    buffer.resize(size);
    if (verdict != fcgi_host::RecordGuard::Verdict::RequestReady) {
      if (verdict != fcgi_host::RecordGuard::Verdict::NeedMore || fed == bytes.size()) break;
      continue;
    }
    std::string records =
        buffer.substr(guard.request_begin(), guard.request_end() - guard.request_begin());
    if (!guard.aborted()) {
      fcgi_host::ReferenceRequest reference = fcgi_host::decode_with_libfcgi(records);
      WalkedRequest walked;
      std::string copy = records;
      bool whole =
          test_support::walk_request(copy.data(), copy.size(), 0, walked) == WalkStatus::Whole;
      CHECK(whole == reference.accepted);
      Pairs seen{{"FCGI_ROLE", "RESPONDER"}}; // libfcgi's first param
      for (const auto& p : walked.params)
        seen.emplace_back(std::string(p.name), std::string(p.value));
      CHECK(seen == reference.params);
      CHECK(body_of(walked) == reference.body);
      // The worker's path: from where the guard found the records, with its one pass's params.
      REQUIRE(guard.framing().params != nullptr);
      DecodedRequest guarded;
      std::string third = records;
      CHECK(fcgi_host::decode_guarded_request(third.data(), third.size(), guard.framing(),
                                              guarded) == DecodeStatus::Whole);
      CHECK(guarded.id == guard.request_id());
      CHECK(guarded.keep_conn == guard.keep_connection());
      Pairs scanned{{"FCGI_ROLE", "RESPONDER"}};
      for (std::size_t i = 0; i < guarded.param_count(); ++i)
        scanned.emplace_back(std::string(guarded.param(i).name),
                             std::string(guarded.param(i).value));
      CHECK(scanned == reference.params);
      app::Request request;
      REQUIRE(fcgi_host::fill_request(guarded, guard.framing(), request));
      CHECK(request.body() == reference.body);
      CHECK(request.body_size() == guard.body_size());
      ++requests;
    }
    buffer.erase(0, guard.request_end());
    guard.consume_request();
  }
  CHECK(requests > 0);
}

} // namespace

TEST_CASE("decoder and libfcgi agree: params, body and verdict for the same bytes") {
  std::string error;
  REQUIRE(fcgi_host::RequestCodec::init_library(error));
  std::mt19937 random(23);
  auto text = [&](std::size_t max) {
    std::string s(std::uniform_int_distribution<std::size_t>(0, max)(random), 'a');
    for (char& c : s)
      c = static_cast<char>(std::uniform_int_distribution<int>(1, 255)(random));
    for (char& c : s)
      if (c == '=') c = '-';
    return s;
  };
  for (int round = 0; round < 200; ++round) {
    Pairs sent;
    int count = std::uniform_int_distribution<int>(0, 30)(random);
    for (int i = 0; i < count; ++i) {
      std::string name = "N" + text(round % 10 == 0 ? 300 : 20);
      sent.emplace_back(name, text(round % 7 == 0 ? 200 : 40));
    }
    std::string body = text(round % 5 == 0 ? 100000 : 300);
    // Small records for small requests only: --max-records bounds a request's records.
    std::size_t chunk =
        std::uniform_int_distribution<std::size_t>(body.size() > 1000 ? 64 : 1, 65535)(random);
    auto padding = static_cast<std::uint8_t>(round % 9);
    std::string bytes = framed(sent, body, chunk, padding, static_cast<std::uint16_t>(round + 1));
    CAPTURE(round);
    compare_with_libfcgi(bytes + bytes, round % 3 == 0 ? 1 : 4096); // and a pipelined second
  }
}

// The request a guard framed from `bytes` in one read, with its bytes (the decoder's views).
struct Guarded {
  std::string bytes;
  fcgi_host::RequestLimits limits;
  fcgi_host::RecordGuard guard{limits, fcgi_host::ServerValues{}};
  explicit Guarded(std::string b) : bytes(std::move(b)) {
    std::string replies;
    std::size_t size = bytes.size();
    REQUIRE(guard.advance(bytes.data(), size, replies) ==
            fcgi_host::RecordGuard::Verdict::RequestReady);
    REQUIRE(guard.request_begin() == 0);
    bytes.resize(guard.request_end());
  }
};

// The request the worker's path gives a handler, from `g`.
void fill_from_guard(Guarded& g, app::Request& request) {
  DecodedRequest decoded;
  REQUIRE(fcgi_host::decode_guarded_request(g.bytes.data(), g.bytes.size(), g.guard.framing(),
                                            decoded) == DecodeStatus::Whole);
  REQUIRE(fcgi_host::fill_request(decoded, g.guard.framing(), request));
}

TEST_CASE("decoder: the handler sees what the guard decided about the params") {
  // A body of unknown length gets its real length as CONTENT_LENGTH; an interpreted param sent
  // twice with one value is seen once; the other params are views, in the order sent.
  Guarded g(framed({{"CONTENT_LENGTH", ""},
                    {"REQUEST_METHOD", "POST"},
                    {"REQUEST_METHOD", "POST"},
                    {"HTTP_X", "1"}},
                   "abc"));
  CHECK(g.guard.framing().params->repeated);
  CHECK_FALSE(g.guard.framing().length_declared);
  app::Request request;
  fill_from_guard(g, request);
  CHECK(request.param("CONTENT_LENGTH") == "3");
  CHECK(request.method() == "POST");
  CHECK(request.param_count() == 4); // FCGI_ROLE, REQUEST_METHOD once, HTTP_X, CONTENT_LENGTH
  CHECK(request.param("HTTP_X").data() >= g.bytes.data());
  CHECK(request.body() == "abc");
  // The repeat before the CONTENT_LENGTH the real length replaces: both left out, nothing else.
  Guarded before(framed({{"REQUEST_METHOD", "POST"},
                         {"QUERY_STRING", "a=1"},
                         {"REQUEST_METHOD", "POST"},
                         {"CONTENT_LENGTH", "-1"},
                         {"QUERY_STRING", "a=1"},
                         {"HTTP_X", "1"}},
                        "abcd"));
  app::Request second;
  fill_from_guard(before, second);
  std::vector<std::string> names;
  for (std::size_t i = 0; i < second.param_count(); ++i)
    names.emplace_back(second.param_at(i).name);
  CHECK(names == std::vector<std::string>{"FCGI_ROLE", "REQUEST_METHOD", "QUERY_STRING", "HTTP_X",
                                          "CONTENT_LENGTH"});
  CHECK(second.param("CONTENT_LENGTH") == "4");
  CHECK(second.query() == "a=1");
}

TEST_CASE("decoder: with the guard's scan, the handler sees what the walk shows") {
  // CONTENT_LENGTH empty (replaced by the body's length), the ids, SCRIPT_NAME standing in for
  // a missing REQUEST_URI, params split across records: the params the walk reads, in order.
  const Pairs sent{{"CONTENT_LENGTH", ""},
                   {"REQUEST_METHOD", "POST"},
                   {"SCRIPT_NAME", "/s"},
                   {"QUERY_STRING", "a=1"},
                   {"HTTP_X_REQUEST_ID", "first"},
                   {"HTTP_X_REQUEST_ID", "last"},
                   {"HTTP_TRACEPARENT", "tp"},
                   {"HTTP_X_REQUEST_START", "t=1700000000.123"},
                   {"EMPTY", ""}};
  for (std::size_t chunk : {3u, 65535u}) {
    CAPTURE(chunk);
    Decoded walked = decode(framed(sent, "abc", chunk));
    REQUIRE(walked.status == WalkStatus::Whole);
    Guarded g(framed(sent, "abc", chunk));
    app::Request b;
    fill_from_guard(g, b);
    // FCGI_ROLE first, CONTENT_LENGTH moved to the end with the body's length.
    Pairs seen;
    for (std::size_t i = 1; i + 1 < b.param_count(); ++i)
      seen.emplace_back(std::string(b.param_at(i).name), std::string(b.param_at(i).value));
    Pairs expected = params_of(walked.request);
    expected.erase(expected.begin()); // CONTENT_LENGTH
    CHECK(seen == expected);
    CHECK(b.param_count() == 10);
    CHECK(b.param_at(0).name == "FCGI_ROLE");
    CHECK(b.param_at(9).name == "CONTENT_LENGTH");
    CHECK(b.param("CONTENT_LENGTH") == "3");
    CHECK(b.method() == "POST");
    CHECK(b.uri() == "/s");
    CHECK(b.query() == "a=1");
    CHECK(b.carried_id() == "last");
    CHECK(b.trace_parent() == "tp");
    CHECK(b.request_start() == "t=1700000000.123");
    CHECK(b.param("EMPTY").empty());
    CHECK(b.has_param("EMPTY"));
    CHECK(b.body() == body_of(walked.request));
  }
}

TEST_CASE("decoder: params other than the guard scanned are refused") {
  Guarded g(framed({{"A", "1"}}, ""));
  fcgi_host::ScannedParams other;
  std::string pairs;
  records::append_name_value(pairs, "AB", "12");
  REQUIRE(fcgi_host::scan_params(pairs, {10, 10}, other).problem == fcgi_host::ParamProblem::None);
  fcgi_host::RequestFraming framing = g.guard.framing();
  framing.params = &other;
  DecodedRequest out;
  CHECK(fcgi_host::decode_guarded_request(g.bytes.data(), g.bytes.size(), framing, out) ==
        DecodeStatus::Malformed);
}

TEST_CASE("decoder: from the guard's records, split and padded params and body are whole") {
  Pairs sent{{"SPLIT_NAME_ACROSS", std::string(40, 'v')}, {"B", ""}, {"CONTENT_LENGTH", "21"}};
  Guarded g(framed(sent, "a body in four pieces", 7, 5, 3, records::kKeepConn));
  const fcgi_host::RequestFraming framing = g.guard.framing();
  CHECK(framing.params_records.size() > 1);
  CHECK(framing.stdin_records.size() == 3);
  DecodedRequest out;
  REQUIRE(fcgi_host::decode_guarded_request(g.bytes.data(), g.bytes.size(), framing, out) ==
          DecodeStatus::Whole);
  CHECK(out.id == 3);
  CHECK(out.keep_conn);
  Pairs seen;
  for (std::size_t i = 0; i < out.param_count(); ++i)
    seen.emplace_back(std::string(out.param(i).name), std::string(out.param(i).value));
  CHECK(seen == sent);
  CHECK(body_of(out) == "a body in four pieces");
  CHECK(out.body_size == 21);
}

TEST_CASE("decoder: records the guard found past the bytes given are malformed") {
  Guarded g(framed({{"A", "1"}}, "xyz"));
  const fcgi_host::RequestFraming framing = g.guard.framing();
  DecodedRequest out;
  std::string why;
  // The bytes cut inside the STDIN record, then inside the PARAMS record's header.
  CHECK(fcgi_host::decode_guarded_request(g.bytes.data(), framing.stdin_records[0] + 9, framing,
                                          out, &why) == DecodeStatus::Malformed);
  CHECK(why == "a STDIN record past the request");
  CHECK(fcgi_host::decode_guarded_request(g.bytes.data(), framing.params_records[0] + 7, framing,
                                          out, &why) == DecodeStatus::Malformed);
  CHECK(why == "a PARAMS record past the request");
}
