// The record codec (fcgi_host/protocol/records.hpp) and the CGI head helper: bytes pinned
// against the FastCGI 1.0 specification's layout, round trips, the 1/4-byte length boundary,
// the record reader at every cut, and lengths that run past the data.
#include "fcgi_host/protocol/cgi_head.hpp"
#include "fcgi_host/protocol/records.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

namespace records = fcgi_host::records;
namespace cgi = fcgi_host::cgi;
using records::Type;

namespace {

std::string bytes(std::initializer_list<int> list) {
  std::string out;
  for (int b : list)
    out.push_back(static_cast<char>(b));
  return out;
}

std::string name_value(std::string_view name, std::string_view value) {
  std::string out;
  records::append_name_value(out, name, value);
  return out;
}

} // namespace

TEST_CASE("records: the header's byte layout, encoded and decoded") {
  std::string out;
  records::append_header(out, Type::Stdout, 0x1234, 0x0102, 5);
  CHECK(out == bytes({1, 6, 0x12, 0x34, 0x01, 0x02, 5, 0}));
  records::Header h = records::decode_header(out.data());
  CHECK(h.version == 1);
  CHECK(h.is(Type::Stdout));
  CHECK(h.request_id == 0x1234);
  CHECK(h.content_length == 0x0102);
  CHECK(h.padding == 5);
  CHECK(h.record_size() == 8 + 0x0102 + 5);
  out.clear();
  records::append_header(out, records::Header{2, 0xee, 0xffff, 0xffff, 255});
  CHECK(out == bytes({2, 0xee, 0xff, 0xff, 0xff, 0xff, 255, 0}));
  CHECK(records::decode_header(out.data()).content_length == 65535);
  CHECK(std::string(records::type_name(Type::GetValuesResult)) == "GET_VALUES_RESULT");
  CHECK(std::string(records::type_name(0xee)) == "unknown type");
}

TEST_CASE("records: name-value lengths take 1 byte up to 127 and 4 bytes from 128") {
  CHECK(name_value("A", std::string(127, 'v')).substr(0, 2) == bytes({1, 127}));
  CHECK(name_value("A", std::string(128, 'v')).substr(0, 5) == bytes({1, 0x80, 0, 0, 128}));
  CHECK(name_value(std::string(300, 'n'), "").substr(0, 5) == bytes({0x80, 0, 0x01, 0x2c, 0}));
  for (std::size_t n : {0, 1, 126, 127, 128, 129, 300, 70000}) {
    CAPTURE(n);
    std::string encoded = name_value(std::string(n, 'n'), std::string(n + 1, 'v'));
    std::string_view data = encoded;
    records::NameValue pair;
    REQUIRE(records::next_name_value(data, pair) == records::PairStatus::Pair);
    CHECK(pair.name == std::string(n, 'n'));
    CHECK(pair.value == std::string(n + 1, 'v'));
    CHECK(data.empty());
    CHECK(records::next_name_value(data, pair) == records::PairStatus::End);
  }
}

TEST_CASE("records: a long length in four bytes is read even where one byte would do") {
  std::string d = bytes({3, 0x80, 0, 0, 2}) + "KEYvv";
  std::vector<records::NameValue> pairs;
  REQUIRE(records::decode_name_values(d, pairs));
  REQUIRE(pairs.size() == 1);
  CHECK(pairs[0].name == "KEY");
  CHECK(pairs[0].value == "vv");
}

TEST_CASE("records: lengths past the end of the data are refused, the data left as it was") {
  const std::string whole = name_value("NAME", std::string(200, 'v'));
  for (std::size_t cut = 1; cut < whole.size(); ++cut) {
    CAPTURE(cut);
    std::string_view data(whole.data(), cut);
    records::NameValue pair;
    CHECK(records::next_name_value(data, pair) == records::PairStatus::Truncated);
    CHECK(data.size() == cut);
  }
  // Lengths near 2^31 with nothing behind them: refused, nothing read past the data.
  std::string_view huge("\xff\xff\xff\xfe\x01X", 6);
  records::NameValue pair;
  CHECK(records::next_name_value(huge, pair) == records::PairStatus::Truncated);
  std::vector<records::NameValue> pairs;
  CHECK_FALSE(records::decode_name_values(name_value("A", "b") + bytes({5, 1}) + "ab", pairs));
  CHECK(pairs.size() == 1); // the whole pairs before the bad one
}

TEST_CASE("records: streams are cut at the chunk size, padded if asked, and end empty") {
  std::string out;
  records::append_stream(out, Type::Stdin, 7, std::string(70000, 's'));
  std::string_view data = out;
  std::vector<std::size_t> sizes;
  for (records::RecordView r; records::take_record(data, r);) {
    CHECK(r.header.is(Type::Stdin));
    CHECK(r.header.request_id == 7);
    sizes.push_back(r.content.size());
  }
  CHECK(data.empty());
  CHECK(sizes == std::vector<std::size_t>{65535, 70000 - 65535, 0});

  out.clear();
  records::append_stream(out, Type::Params, 1, "abcde", 2, 3);
  CHECK(out == bytes({1, 4, 0, 1, 0, 2, 3, 0}) + "ab" + bytes({0, 0, 0}) +
                   bytes({1, 4, 0, 1, 0, 2, 3, 0}) + "cd" + bytes({0, 0, 0}) +
                   bytes({1, 4, 0, 1, 0, 1, 3, 0}) + "e" + bytes({0, 0, 0}) +
                   bytes({1, 4, 0, 1, 0, 0, 3, 0, 0, 0, 0}));
  out.clear();
  records::append_stream(out, Type::Stdout, 1, "");
  CHECK(out == bytes({1, 6, 0, 1, 0, 0, 0, 0}));
}

TEST_CASE("records: BEGIN_REQUEST, ABORT_REQUEST, END_REQUEST, UNKNOWN_TYPE, GET_VALUES") {
  std::string out;
  records::append_begin_request(out, 1, records::Role::Responder, records::kKeepConn);
  CHECK(out == bytes({1, 1, 0, 1, 0, 8, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0}));
  records::BeginRequest begin;
  REQUIRE(records::decode_begin_request(std::string_view(out).substr(8), begin));
  CHECK(begin.role == 1);
  CHECK(begin.keep_conn());
  CHECK_FALSE(records::decode_begin_request("short", begin));

  out.clear();
  records::append_abort_request(out, 0x0203);
  CHECK(out == bytes({1, 2, 2, 3, 0, 0, 0, 0}));

  out.clear();
  records::append_end_request(out, 9, 0x01020304, records::ProtocolStatus::UnknownRole);
  CHECK(out == bytes({1, 3, 0, 9, 0, 8, 0, 0, 1, 2, 3, 4, 3, 0, 0, 0}));
  records::EndRequest end;
  REQUIRE(records::decode_end_request(std::string_view(out).substr(8), end));
  CHECK(end.app_status == 0x01020304);
  CHECK(end.protocol_status == 3);
  CHECK_FALSE(records::decode_end_request("1234567", end));

  // The end of a response: the empty STDOUT and END_REQUEST, as the two appends make them.
  out.clear();
  records::append_response_end(out, 0x0102);
  std::string two;
  records::append_header(two, Type::Stdout, 0x0102, 0);
  records::append_end_request(two, 0x0102, 0, records::ProtocolStatus::RequestComplete);
  CHECK(out == two);
  CHECK(out == bytes({1, 6, 1, 2, 0, 0, 0, 0, 1, 3, 1, 2, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}));

  out.clear();
  records::append_unknown_type(out, 42);
  CHECK(out == bytes({1, 11, 0, 0, 0, 8, 0, 0, 42, 0, 0, 0, 0, 0, 0, 0}));

  out.clear();
  records::append_get_values(out, {records::kMaxConns, records::kMpxsConns});
  std::string_view data = out;
  records::RecordView r;
  REQUIRE(records::take_record(data, r));
  CHECK(r.header.is(Type::GetValues));
  CHECK(r.header.request_id == records::kNullRequestId);
  std::vector<records::NameValue> pairs;
  REQUIRE(records::decode_name_values(r.content, pairs));
  REQUIRE(pairs.size() == 2);
  CHECK(pairs[1].name == "FCGI_MPXS_CONNS");

  out.clear();
  records::append_get_values_result(out, name_value(records::kMaxConns, "1")); // 17 bytes
  CHECK(out.size() == 8 + 17 + 7);
  CHECK(records::decode_header(out.data()).padding == 7);
}

TEST_CASE("records: the error response is a CGI page in STDOUT, then END_REQUEST") {
  std::string out;
  records::append_error_response(out, 3, 413);
  std::string_view data = out;
  std::vector<records::RecordView> got;
  for (records::RecordView r; records::take_record(data, r);)
    got.push_back(r);
  REQUIRE(got.size() == 3);
  CHECK(got[0].header.is(Type::Stdout));
  CHECK(got[0].content ==
        "Status: 413 Content Too Large\r\nContent-Type: text/plain\r\n\r\nContent Too Large\n");
  CHECK((got[1].header.is(Type::Stdout) && got[1].content.empty()));
  CHECK(got[2].header.is(Type::EndRequest));
  CHECK(got[2].header.request_id == 3);
}

TEST_CASE("records: the reader frames the same records whatever the cut") {
  std::string stream;
  records::append_begin_request(stream, 1, records::Role::Responder);
  records::append_stream(stream, Type::Params, 1, name_value("A", std::string(300, 'a')), 100, 7);
  records::append_stream(stream, Type::Stdin, 1, "body");
  records::append_end_request(stream, 1, 0, records::ProtocolStatus::RequestComplete);
  std::vector<std::string> expected;
  {
    std::string_view data = stream;
    for (records::RecordView r; records::take_record(data, r);)
      expected.push_back(std::string(records::type_name(r.header.type)) + ":" +
                         std::string(r.content));
  }
  REQUIRE(expected.size() == 1 + 5 + 2 + 1); // PARAMS: 306 bytes in 100s, then empty
  for (std::size_t cut = 0; cut <= stream.size(); ++cut) {
    CAPTURE(cut);
    records::RecordReader reader;
    std::vector<std::string> got;
    auto take = [&] {
      for (records::RecordView r; reader.next(r);)
        got.push_back(std::string(records::type_name(r.header.type)) + ":" +
                      std::string(r.content));
    };
    reader.append(std::string_view(stream).substr(0, cut));
    take();
    reader.append(std::string_view(stream).substr(cut));
    take();
    CHECK(got == expected);
    CHECK(reader.rest().empty());
  }
  // Byte by byte, and an incomplete record left over.
  records::RecordReader reader;
  std::size_t count = 0;
  std::string torn = stream + stream.substr(0, 11);
  for (char c : torn) {
    reader.append(std::string_view(&c, 1));
    for (records::RecordView r; reader.next(r);)
      ++count;
  }
  CHECK(count == expected.size());
  CHECK(reader.rest() == stream.substr(0, 11));
  CHECK(reader.take_rest() == stream.substr(0, 11));
  CHECK(reader.rest().empty());
}

TEST_CASE("cgi: status line, header lines, and a head parsed back") {
  std::string out;
  cgi::append_status_line(out, 404);
  cgi::append_header_line(out, "Content-Type", "text/plain");
  CHECK(out == "Status: 404 Not Found\r\nContent-Type: text/plain\r\n");
  const std::string output = out + "X-A:  1\r\n\r\nbody\r\n\r\nmore";
  cgi::Head head = cgi::parse_head(output); // views into `output`
  CHECK(head.found);
  CHECK(head.status == 404);
  REQUIRE(head.headers.size() == 2);
  CHECK(head.headers[1].first == "X-A");
  CHECK(head.headers[1].second == "1");
  CHECK(head.body == "body\r\n\r\nmore");
  head = cgi::parse_head("status: 201 Created\nLocation: /x\n\nbody");
  CHECK(head.status == 201);
  CHECK(head.body == "body");
  head = cgi::parse_head("no head at all");
  CHECK_FALSE(head.found);
  CHECK(head.status == 0);
  CHECK(head.body == "no head at all");
  CHECK(cgi::same_header_name("content-length", "Content-Length"));
  CHECK_FALSE(cgi::same_header_name("Content-Length", "Content-Lengths"));
}

TEST_CASE("cgi: the head writer adds Content-Length once and refuses a header that is none") {
  std::string head;
  CHECK(cgi::append_head(head, 201, {{"X-A", "one"}, {"Content-Type", "text/plain"}}, 5));
  CHECK(head == "Status: 201 Created\r\nX-A: one\r\n"
                "Content-Type: text/plain\r\nContent-Length: 5\r\n\r\n");
  std::string own;
  CHECK(cgi::append_head(own, 200, {{"content-length", "3"}}, 5));
  CHECK(own == "Status: 200 OK\r\ncontent-length: 3\r\n\r\n");
  std::string streamed;
  CHECK(cgi::append_head(streamed, 404, {}, std::nullopt));
  CHECK(streamed == "Status: 404 Not Found\r\n\r\n");
  // Appended after what the string held, a length of 0.
  std::string after = "x";
  CHECK(cgi::append_head(after, 500, {{"X-Tab", "a\tb \x80"}}, 0));
  CHECK(after == "xStatus: 500 Internal Server Error\r\nX-Tab: a\tb \x80\r\n"
                 "Content-Length: 0\r\n\r\n");
  // A value that would start a header of its own, a name that would hold one: refused.
  std::string forged;
  CHECK_FALSE(cgi::append_head(forged, 200, {{"X-A", "one\r\nSet-Cookie: forged"}}, 0));
  CHECK_FALSE(cgi::append_head(forged, 200, {{"X-Accel-Redirect: /etc/passwd\r\nX-A", "v"}}, 0));
  CHECK_FALSE(cgi::append_head(forged, 200, {{"A", "ok"}, {"", "v"}}, 0));
}

TEST_CASE("cgi: a header name is an RFC 9110 token, a value holds no CR, LF or NUL") {
  CHECK(cgi::valid_header("X-Accel-Redirect", "/protected/a"));
  CHECK(cgi::valid_header("!#$%&'*+-.^_`|~09azAZ", ""));
  for (std::string_view name : {"", "A B", "A:B", "A: B", "A\r", "A\n", "A\tB", "(x)", "a/b",
                                "caf\xc3\xa9", "a\"b", "a@b", "a{b}"})
    CHECK_MESSAGE(!cgi::valid_header(name, "v"), name);
  CHECK_FALSE(cgi::valid_header("A", std::string_view("a\0b", 3)));
  CHECK_FALSE(cgi::valid_header("A", "a\rb"));
  CHECK_FALSE(cgi::valid_header("A", "a\nb"));
  CHECK(cgi::valid_header("A", "a: b; c=\"d\"\t\xff"));
}
