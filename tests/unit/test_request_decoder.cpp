// The host's request decoder: every param length form, empty values, split params, the body, the
// malformed and over-limit cases; and, against libfcgi as the reference decoder, the same params,
// body and verdict for the same bytes (after the record guard, as on a connection).
#include "fcgi_host/protocol/record_guard.hpp"
#include "fcgi_host/protocol/reference_decoder.hpp"
#include "fcgi_host/protocol/request_adapter.hpp"
#include "fcgi_host/protocol/request_codec.hpp"
#include "fcgi_host/protocol/request_decoder.hpp"

#include <doctest/doctest.h>

#include <random>
#include <string>
#include <utility>
#include <vector>

using fcgi_host::DecodedRequest;
using fcgi_host::DecodeLimits;
using fcgi_host::DecodeStatus;
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
  DecodeStatus status;
  DecodedRequest request;
  std::string bytes; // what the views point into
  std::string why;
};

Decoded decode(std::string bytes, DecodeLimits limits = {}) {
  Decoded d{DecodeStatus::Malformed, {}, std::move(bytes), {}};
  d.status = fcgi_host::decode_request(d.bytes.data(), d.bytes.size(), limits, d.request, &d.why);
  return d;
}

Pairs params_of(const DecodedRequest& r) {
  Pairs out;
  for (const auto& p : r.params)
    out.emplace_back(std::string(p.name), std::string(p.value));
  return out;
}

std::string body_of(const DecodedRequest& r) {
  std::string out;
  for (std::string_view chunk : r.body)
    out += chunk;
  return out;
}

} // namespace

TEST_CASE("decoder: one-byte lengths, empty values and the order sent") {
  Pairs sent{{"REQUEST_METHOD", "GET"}, {"QUERY_STRING", ""}, {"A", "1"}, {"A", "2"}};
  Decoded d = decode(framed(sent, "", 65535, 0, 7, records::kKeepConn));
  REQUIRE(d.status == DecodeStatus::Whole);
  CHECK(params_of(d.request) == sent);
  CHECK(d.request.id == 7);
  CHECK(d.request.keep_conn);
  CHECK(d.request.role == static_cast<std::uint16_t>(records::Role::Responder));
  CHECK(d.request.body.empty());
  CHECK(d.request.body_size == 0);
}

TEST_CASE("decoder: the params are views into the buffer, not copies") {
  Decoded d = decode(framed({{"NAME", "value"}}, "body"));
  REQUIRE(d.status == DecodeStatus::Whole);
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
    REQUIRE(d.status == DecodeStatus::Whole);
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
  REQUIRE(d.status == DecodeStatus::Whole);
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
    REQUIRE(d.status == DecodeStatus::Whole);
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
  CHECK(decode(with_pairs(std::string("\x05", 1))).status == DecodeStatus::Malformed);
  CHECK(decode(with_pairs(std::string("\x80\x00", 2))).status == DecodeStatus::Malformed);
  CHECK(decode(with_pairs(std::string("\x01\x80\x00\x00", 4))).status == DecodeStatus::Malformed);
  CHECK(decode(with_pairs(std::string("\x04\x01"
                                      "ABC",
                                      5)))
            .status == DecodeStatus::Malformed);
  CHECK(decode(with_pairs(std::string("\x01\x05"
                                      "Avvvv",
                                      7)))
            .status == DecodeStatus::Malformed);
  // A value length near 2^31 with a few bytes sent.
  CHECK(decode(with_pairs(std::string("\x01\xff\xff\xff\xff"
                                      "A",
                                      6)))
            .status == DecodeStatus::Malformed);
  CHECK(decode(with_pairs(std::string("\x00\x00", 2))).status == DecodeStatus::Whole);
}

TEST_CASE("decoder: the record sequence must be one whole request") {
  std::string good = framed({{"A", "1"}}, "xy");
  CHECK(decode(good).status == DecodeStatus::Whole);
  for (std::size_t cut : {1u, 7u, 8u, 15u, 16u, 20u})
    CHECK(decode(good.substr(0, good.size() - cut)).status == DecodeStatus::Malformed);
  CHECK(decode(good + good).status == DecodeStatus::Malformed);
  CHECK(decode(good.substr(16)).status == DecodeStatus::Malformed); // no BEGIN_REQUEST
  std::string two_ids = framed({{"A", "1"}}, "");
  two_ids[16 + 3] = 2; // the PARAMS record of request 2
  CHECK(decode(two_ids).status == DecodeStatus::Malformed);
  std::string version = good;
  version[16] = 2;
  CHECK(decode(version).status == DecodeStatus::Malformed);
  CHECK(decode("").status == DecodeStatus::Malformed);
}

TEST_CASE("decoder: --max-params as a limit") {
  Pairs sent{{"A", "1"}, {"B", "2"}, {"C", "3"}};
  CHECK(decode(framed(sent, ""), DecodeLimits{3}).status == DecodeStatus::Whole);
  CHECK(decode(framed(sent, ""), DecodeLimits{2}).status == DecodeStatus::TooManyParams);
}

TEST_CASE("decoder: reuses its vectors from request to request") {
  DecodedRequest r;
  std::string a = framed({{"A", "1"}, {"B", "2"}}, "body");
  REQUIRE(fcgi_host::decode_request(a.data(), a.size(), {}, r) == DecodeStatus::Whole);
  const auto* params = r.params.data();
  std::string b = framed({{"C", "3"}}, "");
  REQUIRE(fcgi_host::decode_request(b.data(), b.size(), {}, r) == DecodeStatus::Whole);
  CHECK(r.params.data() == params);
  CHECK(params_of(r) == Pairs{{"C", "3"}});
  CHECK(r.body.empty());
}

namespace {

// What a handler sees of two requests: every param in order, the fields derived from them, the
// body.
bool same_request(const app::Request& a, const app::Request& b) {
  if (a.param_count() != b.param_count()) return false;
  for (std::size_t i = 0; i < a.param_count(); ++i)
    if (a.param_at(i).name != b.param_at(i).name || a.param_at(i).value != b.param_at(i).value)
      return false;
  return a.method() == b.method() && a.uri() == b.uri() && a.path() == b.path() &&
         a.query() == b.query() && a.carried_id() == b.carried_id() &&
         a.trace_parent() == b.trace_parent() && a.request_start() == b.request_start() &&
         a.body() == b.body();
}

// Both decoders on what the guard lets through: the guard sees the bytes as a connection would
// (in pieces of `step`), and each request it makes ready goes to libfcgi and to the host's
// decoder, which must agree on verdict, params and body.
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
      DecodedRequest mine;
      std::string copy = records;
      bool whole =
          fcgi_host::decode_request(copy.data(), copy.size(), {}, mine) == DecodeStatus::Whole;
      CHECK(whole == reference.accepted);
      Pairs seen{{"FCGI_ROLE", "RESPONDER"}}; // libfcgi's first param
      for (const auto& p : mine.params)
        seen.emplace_back(std::string(p.name), std::string(p.value));
      CHECK(seen == reference.params);
      app::Request request;
      REQUIRE(fcgi_host::fill_request(mine, guard.framing(), request));
      CHECK(request.body() == reference.body);
      CHECK(request.body_size() == guard.body_size());
      // The worker's path: the params from the guard's one pass, not read again.
      REQUIRE(guard.framing().params != nullptr);
      DecodedRequest checked;
      std::string again = records;
      CHECK(fcgi_host::decode_scanned_request(again.data(), again.size(), *guard.framing().params,
                                              checked) == DecodeStatus::Whole);
      Pairs scanned{{"FCGI_ROLE", "RESPONDER"}};
      for (std::size_t i = 0; i < checked.param_count(); ++i)
        scanned.emplace_back(std::string(checked.param(i).name),
                             std::string(checked.param(i).value));
      CHECK(scanned == reference.params);
      app::Request from_scan;
      REQUIRE(fcgi_host::fill_request(checked, guard.framing(), from_scan));
      CHECK(same_request(from_scan, request));
      // And from where the guard found the records, without framing them again.
      DecodedRequest guarded;
      std::string third = records;
      CHECK(fcgi_host::decode_guarded_request(third.data(), third.size(), guard.framing(),
                                              guarded) == DecodeStatus::Whole);
      CHECK(guarded.id == guard.request_id());
      CHECK(guarded.keep_conn == guard.keep_connection());
      app::Request from_guard;
      REQUIRE(fcgi_host::fill_request(guarded, guard.framing(), from_guard));
      CHECK(same_request(from_guard, request));
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

TEST_CASE("decoder: the handler sees what the guard decided about the params") {
  // A body of unknown length gets its real length as CONTENT_LENGTH; an interpreted param sent
  // twice with one value is seen once; the other params are views, in the order sent.
  Decoded d = decode(framed({{"CONTENT_LENGTH", ""},
                             {"REQUEST_METHOD", "POST"},
                             {"REQUEST_METHOD", "POST"},
                             {"HTTP_X", "1"}},
                            "abc"));
  REQUIRE(d.status == DecodeStatus::Whole);
  fcgi_host::RequestFraming framing;
  framing.body_size = 3;
  framing.length_declared = false;
  framing.repeated_params = true;
  app::Request request;
  REQUIRE(fcgi_host::fill_request(d.request, framing, request));
  CHECK(request.param("CONTENT_LENGTH") == "3");
  CHECK(request.method() == "POST");
  CHECK(request.param_count() == 4); // FCGI_ROLE, REQUEST_METHOD once, HTTP_X, CONTENT_LENGTH
  CHECK(request.param("HTTP_X").data() >= d.bytes.data());
  CHECK(request.body() == "abc");
}

TEST_CASE("decoder: with the guard's scan, the handler sees what the walk would show") {
  // CONTENT_LENGTH empty (replaced by the body's length), the ids, SCRIPT_NAME standing in for
  // a missing REQUEST_URI, params split across records: both paths give the same request.
  for (std::size_t chunk : {3u, 65535u}) {
    CAPTURE(chunk);
    std::string bytes = framed({{"CONTENT_LENGTH", ""},
                                {"REQUEST_METHOD", "POST"},
                                {"SCRIPT_NAME", "/s"},
                                {"QUERY_STRING", "a=1"},
                                {"HTTP_X_REQUEST_ID", "first"},
                                {"HTTP_X_REQUEST_ID", "last"},
                                {"HTTP_TRACEPARENT", "tp"},
                                {"HTTP_X_REQUEST_START", "t=1700000000.123"},
                                {"EMPTY", ""}},
                               "abc", chunk);
    fcgi_host::RequestLimits limits;
    fcgi_host::RecordGuard guard(limits, fcgi_host::ServerValues{});
    std::string replies;
    std::size_t size = bytes.size();
    REQUIRE(guard.advance(bytes.data(), size, replies) ==
            fcgi_host::RecordGuard::Verdict::RequestReady);
    std::string walked = bytes;
    DecodedRequest by_walk, by_scan;
    REQUIRE(fcgi_host::decode_request(walked.data(), walked.size(), {}, by_walk) ==
            DecodeStatus::Whole);
    REQUIRE(fcgi_host::decode_scanned_request(bytes.data(), bytes.size(), *guard.framing().params,
                                              by_scan) == DecodeStatus::Whole);
    app::Request a, b;
    REQUIRE(fcgi_host::fill_request(by_walk, guard.framing(), a));
    REQUIRE(fcgi_host::fill_request(by_scan, guard.framing(), b));
    CHECK(same_request(a, b));
    CHECK(b.param("CONTENT_LENGTH") == "3");
    CHECK(b.method() == "POST");
    CHECK(b.uri() == "/s");
    CHECK(b.query() == "a=1");
    CHECK(b.carried_id() == "last");
    CHECK(b.trace_parent() == "tp");
    CHECK(b.request_start() == "t=1700000000.123");
    CHECK(b.param_count() == 10); // FCGI_ROLE first, CONTENT_LENGTH moved to the end
    CHECK(b.param_at(0).name == "FCGI_ROLE");
    CHECK(b.param("EMPTY").empty());
    CHECK(b.has_param("EMPTY"));
  }
}

TEST_CASE("decoder: params other than the guard scanned are refused") {
  std::string bytes = framed({{"A", "1"}}, "");
  fcgi_host::ScannedParams other;
  std::string pairs;
  records::append_name_value(pairs, "AB", "12");
  REQUIRE(fcgi_host::scan_params(pairs, {10, 10}, other).problem == fcgi_host::ParamProblem::None);
  DecodedRequest out;
  CHECK(fcgi_host::decode_scanned_request(bytes.data(), bytes.size(), other, out) ==
        DecodeStatus::Malformed);
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
