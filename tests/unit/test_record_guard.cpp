// The record guard: what reaches libfcgi, what is answered by the host, what is refused.
// Records are built with the test client's encoders (the codec's byte layout is pinned against
// the spec in test_records.cpp).
#include "fcgi_host/protocol/record_guard.hpp"
#include "fcgi_host/testing/fcgi_test_client.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using fcgi_host::RecordGuard;
using fcgi_host::RequestLimits;
using fcgi_host::ServerValues;
using fcgi_test::RecordType;
using Verdict = RecordGuard::Verdict;

namespace {

std::string request_bytes(std::uint16_t id, const fcgi_test::Params& params, std::string body,
                          std::uint8_t flags = 0) {
  std::string out =
      fcgi_test::encode_record(RecordType::BeginRequest, id,
                               fcgi_test::begin_request_body(fcgi_test::Role::Responder, flags));
  out += fcgi_test::encode_stream(RecordType::Params, id, fcgi_test::encode_params(params));
  out += fcgi_test::encode_stream(RecordType::Stdin, id, body);
  return out;
}

std::string simple_request(std::uint16_t id = 1, std::string body = "", std::uint8_t flags = 0) {
  return request_bytes(id, fcgi_test::standard_params("POST", "/x", body.size()), body, flags);
}

// Feeds bytes to a guard the way a connection does, and keeps the replies.
struct Feed {
  RequestLimits limits;
  ServerValues values{8, 4};
  RecordGuard guard{limits, values};
  std::string buffer;
  std::string replies;

  explicit Feed(RequestLimits l = {}) : limits(l), guard(l, values) {}
  Verdict add(const std::string& bytes) {
    buffer += bytes;
    std::size_t size = buffer.size();
    Verdict v = guard.advance(buffer.data(), size, replies);
    buffer.resize(size);
    return v;
  }
  std::vector<fcgi_test::Record> reply_records() const {
    std::vector<fcgi_test::Record> out;
    std::string_view rest = replies;
    for (fcgi_host::records::RecordView r; fcgi_host::records::take_record(rest, r);) {
      out.push_back({r.header.version, static_cast<RecordType>(r.header.type), r.header.request_id,
                     std::string(r.content)});
      bool aligned = r.header.record_size() % 8 == 0 || r.header.padding == 0;
      CHECK(aligned);
    }
    CHECK(rest.empty());
    return out;
  }
};

} // namespace

TEST_CASE("a whole request is ready, with its range and keep-alive flag") {
  Feed f;
  std::string req = simple_request(7, "hello", fcgi_test::kKeepConn);
  CHECK(f.add(req) == Verdict::RequestReady);
  CHECK(f.guard.request_id() == 7);
  CHECK(f.guard.keep_connection());
  CHECK(f.guard.body_size() == 5);
  CHECK(f.guard.request_begin() == 0);
  CHECK(f.guard.request_end() == req.size());
  CHECK(f.replies.empty());
}

TEST_CASE("a request trickled byte by byte is ready only at its last byte") {
  Feed f;
  std::string req = simple_request(1, "body");
  for (std::size_t i = 0; i + 1 < req.size(); ++i)
    REQUIRE(f.add(req.substr(i, 1)) == Verdict::NeedMore);
  CHECK(f.add(req.substr(req.size() - 1)) == Verdict::RequestReady);
}

TEST_CASE("pipelined requests: the second waits in the buffer until the first is consumed") {
  Feed f;
  std::string first = simple_request(1, "a", fcgi_test::kKeepConn);
  std::string second = simple_request(2, "bb", fcgi_test::kKeepConn);
  CHECK(f.add(first + second) == Verdict::RequestReady);
  CHECK(f.guard.request_id() == 1);
  CHECK(f.guard.request_end() == first.size());
  CHECK(f.add("") == Verdict::RequestReady); // still the first; no CANT_MPX_CONN for the second
  CHECK(f.replies.empty());
  f.buffer.erase(0, f.guard.request_end());
  f.guard.consume_request();
  CHECK(f.add("") == Verdict::RequestReady);
  CHECK(f.guard.request_id() == 2);
  CHECK(f.guard.body_size() == 2);
}

TEST_CASE("GET_VALUES: each variable answered once, truthfully, padded to 8 bytes") {
  Feed f;
  fcgi_test::Params names = {{"FCGI_MAX_CONNS", ""},  {"FCGI_MAX_CONNS", ""},
                             {"FCGI_MPXS_CONNS", ""}, {"FCGI_MAX_REQS", ""},
                             {"FCGI_MAX_CONNS", ""},  {"OTHER", ""}};
  // Zero padding: libfcgi 2.4.2 never answers this one.
  CHECK(f.add(fcgi_test::encode_record(RecordType::GetValues, 0,
                                       fcgi_test::encode_params(names))) == Verdict::NeedMore);
  CHECK(f.buffer.empty()); // libfcgi never sees it
  auto records = f.reply_records();
  REQUIRE(records.size() == 1);
  CHECK(records[0].type == RecordType::GetValuesResult);
  fcgi_test::Params values = fcgi_test::decode_params(records[0].content);
  CHECK(values == fcgi_test::Params{
                      {"FCGI_MAX_CONNS", "8"}, {"FCGI_MAX_REQS", "4"}, {"FCGI_MPXS_CONNS", "0"}});
}

TEST_CASE("unknown management types get FCGI_UNKNOWN_TYPE, a flood is cut") {
  RequestLimits limits;
  limits.max_management_records = 5;
  Feed f(limits);
  CHECK(f.add(fcgi_test::encode_record(std::uint8_t{42}, 0, "xyz")) == Verdict::NeedMore);
  auto records = f.reply_records();
  REQUIRE(records.size() == 1);
  CHECK(records[0].type == RecordType::UnknownType);
  CHECK(static_cast<unsigned char>(records[0].content[0]) == 42);
  for (int i = 0; i < 4; ++i)
    CHECK(f.add(fcgi_test::encode_record(std::uint8_t{42}, 0, "")) == Verdict::NeedMore);
  CHECK(f.add(fcgi_test::encode_record(std::uint8_t{42}, 0, "")) == Verdict::Close);
}

TEST_CASE("a management record in the middle of a request is answered and removed") {
  Feed f;
  std::string req = simple_request(1, "xy");
  std::string mgmt = fcgi_test::encode_record(std::uint8_t{99}, 0, "");
  std::size_t cut = 16; // after BEGIN_REQUEST
  CHECK(f.add(req.substr(0, cut) + mgmt + req.substr(cut)) == Verdict::RequestReady);
  CHECK(f.buffer == req);
  CHECK(f.reply_records().size() == 1);
}

TEST_CASE("a second BEGIN on one connection: FCGI_CANT_MPX_CONN, the same id again: closed") {
  Feed f;
  std::string begin1 =
      fcgi_test::encode_record(RecordType::BeginRequest, 1, fcgi_test::begin_request_body());
  std::string begin2 =
      fcgi_test::encode_record(RecordType::BeginRequest, 2, fcgi_test::begin_request_body());
  CHECK(f.add(begin1 + begin2) == Verdict::NeedMore);
  auto records = f.reply_records();
  REQUIRE(records.size() == 1);
  CHECK(records[0].type == RecordType::EndRequest);
  CHECK(records[0].request_id == 2);
  CHECK(fcgi_test::decode_end_request(records[0].content).protocol_status ==
        fcgi_test::kCantMpxConn);
  CHECK(f.add(begin1) == Verdict::Close);
}

TEST_CASE("roles other than RESPONDER: FCGI_UNKNOWN_ROLE") {
  Feed f;
  CHECK(f.add(fcgi_test::encode_record(
            RecordType::BeginRequest, 3,
            fcgi_test::begin_request_body(fcgi_test::Role::Authorizer))) == Verdict::Close);
  auto records = f.reply_records();
  REQUIRE(records.size() == 1);
  CHECK(fcgi_test::decode_end_request(records[0].content).protocol_status ==
        fcgi_test::kUnknownRole);
}

TEST_CASE("wrong version, HTTP, foreign ids, records out of order: closed with a reason") {
  CHECK(Feed().add(fcgi_test::encode_record(static_cast<std::uint8_t>(RecordType::BeginRequest), 1,
                                            fcgi_test::begin_request_body(), 0, 2)) ==
        Verdict::Close);
  Feed http;
  CHECK(http.add("GET / HTTP/1.1\r\nHost: x\r\n\r\n") == Verdict::Close);
  CHECK(http.guard.close_reason().find("HTTP") != std::string::npos);
  Feed foreign;
  CHECK(foreign.add(fcgi_test::encode_record(RecordType::Params, 9, "")) == Verdict::Close);
  Feed early_stdin;
  std::string begin =
      fcgi_test::encode_record(RecordType::BeginRequest, 1, fcgi_test::begin_request_body());
  CHECK(early_stdin.add(begin + fcgi_test::encode_record(RecordType::Stdin, 1, "x")) ==
        Verdict::Close);
  Feed bad_begin;
  CHECK(bad_begin.add(fcgi_test::encode_record(RecordType::BeginRequest, 1, "abc")) ==
        Verdict::Close);
  Feed stdout_from_client;
  CHECK(stdout_from_client.add(begin + fcgi_test::encode_record(RecordType::Stdout, 1, "x")) ==
        Verdict::Close);
}

TEST_CASE("lying name-value lengths (near INT_MAX) are refused with 400") {
  Feed f;
  std::string begin =
      fcgi_test::encode_record(RecordType::BeginRequest, 1, fcgi_test::begin_request_body());
  std::string lying = "\x7f\xff\xff\xfe\x01"
                      "AB";
  CHECK(f.add(begin + fcgi_test::encode_record(RecordType::Params, 1, lying) +
              fcgi_test::encode_record(RecordType::Params, 1, "")) == Verdict::Reject);
  CHECK(f.guard.error_status() == 400);
}

TEST_CASE("NUL bytes and '=' in params are refused with 400") {
  Feed nul;
  CHECK(nul.add(request_bytes(1, {{"A", std::string("x\0y", 3)}}, "")) == Verdict::Reject);
  CHECK(nul.guard.error_status() == 400);
  Feed eq;
  CHECK(eq.add(request_bytes(1, {{"A=B", "x"}}, "")) == Verdict::Reject);
}

TEST_CASE("params over the size or count limit: 400 before the record is buffered") {
  RequestLimits limits;
  limits.max_params_size = 1024;
  limits.max_params = 3;
  Feed big(limits);
  std::string begin =
      fcgi_test::encode_record(RecordType::BeginRequest, 1, fcgi_test::begin_request_body());
  std::string header_only =
      fcgi_test::encode_record(RecordType::Params, 1, std::string(2000, 'a')).substr(0, 8);
  CHECK(big.add(begin + header_only) == Verdict::Reject);
  CHECK(big.guard.error_status() == 400);
  Feed many(limits);
  CHECK(many.add(request_bytes(1, {{"A", "1"}, {"B", "2"}, {"C", "3"}, {"D", "4"}}, "")) ==
        Verdict::Reject);
}

TEST_CASE("body over --max-body: 413, from CONTENT_LENGTH or from the records") {
  RequestLimits limits;
  limits.max_body = 10;
  Feed declared(limits);
  CHECK(declared.add(simple_request(1, std::string(11, 'x'))) == Verdict::Reject);
  CHECK(declared.guard.error_status() == 413);
  Feed undeclared(limits);
  CHECK(undeclared.add(request_bytes(1, {{"REQUEST_METHOD", "POST"}}, std::string(11, 'x'))) ==
        Verdict::Reject);
  CHECK(undeclared.guard.error_status() == 413);
}

TEST_CASE("CONTENT_LENGTH must match the body") {
  Feed shorter;
  CHECK(shorter.add(request_bytes(1, {{"CONTENT_LENGTH", "5"}}, "abc")) == Verdict::Reject);
  CHECK(shorter.guard.error_status() == 400);
  Feed longer;
  CHECK(longer.add(request_bytes(1, {{"CONTENT_LENGTH", "2"}}, "abc")) == Verdict::Reject);
  Feed garbage;
  CHECK(garbage.add(request_bytes(1, {{"CONTENT_LENGTH", "12x"}}, "")) == Verdict::Reject);
  Feed empty_is_fine;
  CHECK(empty_is_fine.add(request_bytes(1, {{"CONTENT_LENGTH", ""}}, "")) == Verdict::RequestReady);
}

TEST_CASE("CONTENT_LENGTH absent, empty or -1: the body is STDIN up to its empty record") {
  for (const char* length : std::initializer_list<const char*>{"", "-1", nullptr}) {
    CAPTURE((length ? length : "(absent)"));
    fcgi_test::Params params = {{"REQUEST_METHOD", "POST"}};
    if (length) params.emplace_back("CONTENT_LENGTH", length);
    Feed f;
    CHECK(f.add(request_bytes(1, params, "chunked body")) == Verdict::RequestReady);
    fcgi_host::RequestFraming framing = f.guard.framing();
    CHECK(framing.body_size == 12);
    CHECK_FALSE(framing.length_declared);
    CHECK_FALSE(framing.params->repeated);
    RequestLimits limits;
    limits.max_body = 11; // still bounded by --max-body, counted from the records
    Feed over(limits);
    CHECK(over.add(request_bytes(1, params, "chunked body")) == Verdict::Reject);
    CHECK(over.guard.error_status() == 413);
  }
  Feed declared;
  CHECK(declared.add(simple_request(1, "abc")) == Verdict::RequestReady);
  CHECK(declared.guard.framing().length_declared);
  for (const char* not_a_length : {"-2", "+3", " 3", "3 ", "0x3", "-"}) {
    CAPTURE(not_a_length);
    Feed f;
    CHECK(f.add(request_bytes(1, {{"CONTENT_LENGTH", not_a_length}}, "abc")) == Verdict::Reject);
    CHECK(f.guard.error_status() == 400);
  }
}

TEST_CASE("an interpreted param sent twice: one value is taken once, two values are a 400") {
  struct Case {
    fcgi_test::Params params;
    std::string body;
  };
  // CONTENT_LENGTH 3 then 10: neither the first nor the last may decide the body's length.
  for (const Case& k :
       {Case{{{"CONTENT_LENGTH", "3"}, {"CONTENT_LENGTH", "10"}}, "0123456789"},
        Case{{{"CONTENT_LENGTH", "3"}, {"CONTENT_LENGTH", "10"}}, "012"},
        Case{{{"CONTENT_LENGTH", ""}, {"CONTENT_LENGTH", "3"}}, "012"},
        Case{{{"CONTENT_LENGTH", "-1"}, {"CONTENT_LENGTH", "3"}}, "012"},
        Case{{{"REQUEST_URI", "/a"}, {"REQUEST_URI", "/b"}}, ""},
        Case{{{"REQUEST_METHOD", "GET"}, {"REQUEST_METHOD", "DELETE"}}, ""},
        Case{{{"REMOTE_ADDR", "10.0.0.1"}, {"REMOTE_ADDR", "127.0.0.1"}}, ""},
        Case{{{"HTTP_X_REQUEST_START", "t=1"}, {"HTTP_X_REQUEST_START", "t=2"}}, ""}}) {
    CAPTURE(k.params[0].first);
    Feed f;
    CHECK(f.add(request_bytes(1, k.params, k.body)) == Verdict::Reject);
    CHECK(f.guard.error_status() == 400);
    CHECK(f.guard.close_reason().find("sent twice") != std::string::npos);
  }
  Feed same;
  CHECK(same.add(request_bytes(
            1, {{"CONTENT_LENGTH", "3"}, {"QUERY_STRING", "a=1"}, {"CONTENT_LENGTH", "3"}},
            "012")) == Verdict::RequestReady);
  CHECK(same.guard.framing().params->repeated);
  CHECK(same.guard.framing().length_declared);
  // A header the host does not interpret may repeat (HTTP list headers do): not a 400.
  Feed header;
  CHECK(header.add(request_bytes(1, {{"HTTP_ACCEPT", "a/b"}, {"HTTP_ACCEPT", "c/d"}}, "")) ==
        Verdict::RequestReady);
  CHECK_FALSE(header.guard.framing().params->repeated);
  // The state is per request: a kept connection's next request starts clean.
  const std::size_t end = same.guard.request_end();
  same.guard.consume_request();
  same.buffer.erase(0, end);
  REQUIRE(same.add(request_bytes(2, {{"CONTENT_LENGTH", "0"}}, "")) == Verdict::RequestReady);
  CHECK_FALSE(same.guard.framing().params->repeated);
}

TEST_CASE("noted_param_index knows each noted name and nothing else") {
  using fcgi_host::kNotedParams;
  using fcgi_host::kNotNoted;
  using fcgi_host::noted_param_index;
  for (std::size_t i = 0; i < kNotedParams.size(); ++i)
    CHECK(noted_param_index(kNotedParams[i]) == i);
  CHECK(noted_param_index("REQUEST_URI") == fcgi_host::kRequestUri);
  CHECK(noted_param_index("HTTP_X_REQUEST_ID") == fcgi_host::kRequestId);
  for (std::string_view other : {"CONTENT_LENGTH_", "CONTENT_LENGTh", "HTTP_HOST", "SERVER_NAME",
                                 "REMOTE_PORT", "DOCUMENT_URI", "X", ""})
    CHECK(noted_param_index(other) == kNotNoted);
}

TEST_CASE("legal but unusual framing: 255 bytes of padding, 65535-byte records, split pairs") {
  Feed f;
  std::string params =
      fcgi_test::encode_params({{"REQUEST_METHOD", "GET"}, {"LONG", std::string(300, 'v')}});
  std::string out =
      fcgi_test::encode_record(RecordType::BeginRequest, 1, fcgi_test::begin_request_body(), 255);
  // A pair split across three records, at awkward places.
  out += fcgi_test::encode_record(RecordType::Params, 1, params.substr(0, 1), 7);
  out += fcgi_test::encode_record(RecordType::Params, 1, params.substr(1, 20));
  out += fcgi_test::encode_record(RecordType::Params, 1, params.substr(21), 255);
  out += fcgi_test::encode_record(RecordType::Params, 1, "");
  out += fcgi_test::encode_record(RecordType::Stdin, 1, std::string(65535, 'b'), 1);
  out += fcgi_test::encode_record(RecordType::Stdin, 1, "");
  CHECK(f.add(out) == Verdict::RequestReady);
  CHECK(f.guard.body_size() == 65535);
}

TEST_CASE("FCGI_ABORT_REQUEST marks the request aborted and is not passed on") {
  Feed f;
  std::string req = simple_request(1, "");
  std::string abort = fcgi_test::encode_record(RecordType::AbortRequest, 1, "");
  std::size_t before_stdin = req.size() - 8;
  CHECK(f.add(req.substr(0, before_stdin) + abort + req.substr(before_stdin)) ==
        Verdict::RequestReady);
  CHECK(f.guard.aborted());
  CHECK(f.buffer == req);
  Feed after;
  CHECK(after.add(req) == Verdict::RequestReady);
  CHECK_FALSE(after.guard.aborted());
  CHECK(after.add(abort) == Verdict::RequestReady);
  CHECK(after.guard.aborted());
}

TEST_CASE("too many records in one request: closed") {
  RequestLimits limits;
  limits.max_records = 10;
  Feed f(limits);
  std::string begin =
      fcgi_test::encode_record(RecordType::BeginRequest, 1, fcgi_test::begin_request_body());
  std::string out = begin + fcgi_test::encode_stream(RecordType::Params, 1,
                                                     fcgi_test::encode_params({{"A", "1"}}));
  for (int i = 0; i < 20; ++i)
    out += fcgi_test::encode_record(RecordType::Stdin, 1, "x");
  CHECK(f.add(out) == Verdict::Close);
}

TEST_CASE("noted_param_index: every name of the table's lengths, one letter off, is none") {
  using fcgi_host::kNotedParams;
  using fcgi_host::kNotNoted;
  using fcgi_host::noted_param_index;
  for (std::string_view known : kNotedParams)
    for (std::size_t i = 0; i < known.size(); ++i) {
      std::string near(known);
      near[i] = near[i] == 'X' ? 'Y' : 'X';
      CHECK_MESSAGE(noted_param_index(near) == kNotNoted, near);
    }
}

TEST_CASE("the header's refusals say which limit or what was spoken") {
  Feed other_version;
  CHECK(other_version.add(
            fcgi_test::encode_record(static_cast<std::uint8_t>(RecordType::BeginRequest), 1,
                                     fcgi_test::begin_request_body(), 0, 2)) == Verdict::Close);
  CHECK(other_version.guard.close_reason() == "FastCGI version 2 (only 1 is spoken)");
  Feed http;
  CHECK(http.add("POST /x HTTP/1.1\r\n\r\n") == Verdict::Close);
  CHECK(http.guard.close_reason() == "HTTP spoken to the FastCGI socket");
  RequestLimits limits;
  limits.max_params_size = 100;
  limits.max_body = 10;
  limits.max_records = 4;
  const std::string begin =
      fcgi_test::encode_record(RecordType::BeginRequest, 1, fcgi_test::begin_request_body());
  Feed params(limits);
  CHECK(params.add(begin + fcgi_test::encode_record(RecordType::Params, 1, std::string(101, 'a'))
                               .substr(0, 8)) == Verdict::Reject);
  CHECK(params.guard.error_status() == 400);
  CHECK(params.guard.close_reason() == "FastCGI params over --max-params-size (100 bytes)");
  Feed body(limits);
  CHECK(body.add(
            begin + fcgi_test::encode_stream(RecordType::Params, 1, fcgi_test::encode_params({})) +
            fcgi_test::encode_record(RecordType::Stdin, 1, std::string(11, 'x')).substr(0, 8)) ==
        Verdict::Reject);
  CHECK(body.guard.error_status() == 413);
  CHECK(body.guard.close_reason() == "request body over --max-body (10 bytes)");
  Feed records(limits);
  std::string many = begin;
  for (int i = 0; i < 4; ++i)
    many += fcgi_test::encode_record(RecordType::Params, 1, fcgi_test::encode_params({{"A", "1"}}));
  CHECK(records.add(many) == Verdict::Close);
  CHECK(records.guard.close_reason() == "more than 4 records in a request");
}

namespace {

// What the guard made of `bytes` given at once, where it takes the usual request in one step.
struct Outcome {
  Verdict verdict;
  std::size_t begin, end, body, params, params_record;
  bool keep, declared;
  int status;
  std::string reason;
  bool operator==(const Outcome&) const = default;
};
Outcome outcome_of(Feed& f, Verdict v) {
  const fcgi_host::RequestFraming framing = f.guard.framing();
  return {v,
          f.guard.request_begin(),
          f.guard.request_end(),
          f.guard.body_size(),
          framing.params ? framing.params->spans().size() : 0,
          framing.params_records.empty() ? 0 : framing.params_records[0],
          f.guard.keep_connection(),
          framing.length_declared,
          f.guard.error_status(),
          f.guard.close_reason()};
}
Outcome whole(const std::string& bytes, RequestLimits limits = {}) {
  Feed f(limits);
  return outcome_of(f, f.add(bytes));
}
// The same bytes one at a time: record by record, never the one step.
Outcome byte_by_byte(const std::string& bytes, RequestLimits limits = {}) {
  Feed f(limits);
  Verdict v = Verdict::NeedMore;
  for (char c : bytes)
    if ((v = f.add(std::string(1, c))) != Verdict::NeedMore) break;
  return outcome_of(f, v);
}

} // namespace

TEST_CASE("the usual request in one step: the same outcome as record by record") {
  using fcgi_test::encode_record;
  const auto begin = [](std::uint8_t flags, std::uint8_t padding = 0) {
    return encode_record(RecordType::BeginRequest, 3,
                         fcgi_test::begin_request_body(fcgi_test::Role::Responder, flags), padding);
  };
  const std::string params = fcgi_test::encode_params(fcgi_test::standard_params("GET", "/a", 0));
  const std::string empty_params = encode_record(RecordType::Params, 3, "");
  const std::string empty_stdin = encode_record(RecordType::Stdin, 3, "");
  auto with_length = [](std::string value) {
    return fcgi_test::encode_params(
        fcgi_test::standard_params("GET", "/a", 0, {{"CONTENT_LENGTH", std::move(value)}}));
  };
  RequestLimits one_param; // a scan that refuses
  one_param.max_params = 1;
  RequestLimits three_records;
  three_records.max_records = 3;

  struct Case {
    const char* what;
    std::string bytes;
    RequestLimits limits;
    Verdict expected;
  } cases[] = {
      {"usual",
       begin(0) + encode_record(RecordType::Params, 3, params) + empty_params + empty_stdin,
       {},
       Verdict::RequestReady},
      {"kept, padded params, padded stdin, a second request after it",
       begin(fcgi_test::kKeepConn) + encode_record(RecordType::Params, 3, params, 5) +
           empty_params + encode_record(RecordType::Stdin, 3, "", 7) + begin(0),
       {},
       Verdict::RequestReady},
      {"padded BEGIN_REQUEST (taken out by the steps)",
       begin(0, 8) + encode_record(RecordType::Params, 3, params) + empty_params + empty_stdin,
       {},
       Verdict::RequestReady},
      {"padded end of the params",
       begin(0) + encode_record(RecordType::Params, 3, params) +
           encode_record(RecordType::Params, 3, "", 3) + empty_stdin,
       {},
       Verdict::RequestReady},
      {"CONTENT_LENGTH 5 and no body",
       begin(0) + encode_record(RecordType::Params, 3, with_length("5")) + empty_params +
           empty_stdin,
       {},
       Verdict::Reject},
      {"CONTENT_LENGTH 0",
       begin(0) + encode_record(RecordType::Params, 3, with_length("0")) + empty_params +
           empty_stdin,
       {},
       Verdict::RequestReady},
      {"more params than allowed",
       begin(0) + encode_record(RecordType::Params, 3, params) + empty_params + empty_stdin,
       one_param, Verdict::Reject},
      {"more records than allowed",
       begin(0) + encode_record(RecordType::Params, 3, params) + empty_params + empty_stdin,
       three_records, Verdict::Close},
      {"the end of the body of another request",
       begin(0) + encode_record(RecordType::Params, 3, params) + empty_params +
           encode_record(RecordType::Stdin, 4, ""),
       {},
       Verdict::Close},
      {"version 2 on the end of the params",
       begin(0) + encode_record(RecordType::Params, 3, params) + encode_record(4, 3, "", 0, 2) +
           empty_stdin,
       {},
       Verdict::Close},
  };
  for (const Case& c : cases) {
    CAPTURE(c.what);
    const Outcome at_once = whole(c.bytes, c.limits);
    CHECK(at_once.verdict == c.expected);
    CHECK(at_once == byte_by_byte(c.bytes, c.limits));
  }
  // What the one step leaves for the decoder.
  Outcome usual = whole(cases[1].bytes);
  CHECK(usual.keep);
  CHECK(usual.params_record == 16);
  CHECK(usual.end == cases[1].bytes.size() - 16); // the next BEGIN_REQUEST waits
  CHECK(usual.params == fcgi_test::standard_params("GET", "/a", 0).size());
}
