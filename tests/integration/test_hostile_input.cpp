// Hostile input: the real fcgi-host (echo app, one worker, small limits) spoken to with the raw
// client, sending what no web server would. Each case asserts the exact outcome (closed, or an
// answer), then that the same worker still serves a normal request on a fresh connection, that
// it did not restart, and that it logged at most one line per bad connection.
#include "checks.hpp"
#include "request_modes.hpp"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sys/socket.h>
#include <thread>

using namespace std::chrono_literals;
using fcgi_test::Client;
using fcgi_test::IoStatus;
using fcgi_test::Millis;
using fcgi_test::Params;
using fcgi_test::RecordType;
using fcgi_test::Role;
using it::HostProcess;

namespace {

constexpr Millis kHostileWait{3000};

// The limits of every case, unless a case replaces one (same option name).
std::vector<std::string> host_args(const std::vector<std::string>& overrides) {
  std::vector<std::string> args{"--app",
                                "echo",
                                "--workers",
                                "1",
                                "--max-body",
                                "64K",
                                "--max-params-size",
                                "4K",
                                "--max-params",
                                "64",
                                "--max-records",
                                "64",
                                "--header-timeout",
                                "1",
                                "--body-timeout",
                                "1"};
  return test_support::with_options(args, overrides);
}

std::size_t warn_lines(const HostProcess& host) {
  return it::lines_with(host.log(), "[warn]").size();
}

// A host with one worker, remembered so that each case can check it never died.
struct Hostile {
  HostProcess host;
  pid_t worker = -1;
  std::size_t warns_at_start = 0;

  explicit Hostile(const std::vector<std::string>& overrides = {})
      : host(it::with_threads(host_args(overrides))) {
    auto workers = host.wait_workers(1);
    REQUIRE(workers.size() == 1);
    worker = workers[0];
    warns_at_start = warn_lines(host);
  }

  Client connect() { return host.connect(kHostileWait); }

  // The same worker answers a normal request on a fresh connection, and logged at most one
  // line per bad connection.
  void check_still_serves(std::size_t bad_connections) {
    Client c = connect();
    fcgi_test::Response r = c.request("GET", "/after?ok=1");
    CHECK(r.ended);
    CHECK(r.status == 200);
    CHECK(r.protocol_status == fcgi_test::kRequestComplete);
    CHECK(r.body.find("path=/after\n") != std::string::npos);
    CHECK(host.worker_pids() == std::vector<pid_t>{worker});
    std::size_t warns = warn_lines(host) - warns_at_start;
    INFO("host log:\n" << host.log());
    CHECK(warns <= bad_connections);
    it::check_no_alerts(host);
  }
};

std::string raw_request(std::uint16_t id, const Params& params, std::string_view body,
                        std::uint8_t flags = 0) {
  return fcgi_test::encode_record(RecordType::BeginRequest, id,
                                  fcgi_test::begin_request_body(Role::Responder, flags)) +
         fcgi_test::encode_stream(RecordType::Params, id, fcgi_test::encode_params(params)) +
         fcgi_test::encode_stream(RecordType::Stdin, id, body);
}

std::string begin(std::uint16_t id, std::uint8_t flags = 0) {
  return fcgi_test::encode_record(RecordType::BeginRequest, id,
                                  fcgi_test::begin_request_body(Role::Responder, flags));
}

Params get_params(const std::string& uri) {
  return fcgi_test::standard_params("GET", uri, 0);
}

// The records in raw bytes (a whole number of them; a torn tail is ignored).
std::vector<fcgi_test::Record> split_records(std::string_view data) {
  std::vector<fcgi_test::Record> out;
  for (fcgi_host::records::RecordView r; fcgi_host::records::take_record(data, r);)
    out.push_back({r.header.version, static_cast<RecordType>(r.header.type), r.header.request_id,
                   std::string(r.content)});
  return out;
}

std::size_t count_of(std::string_view text, std::string_view needle) {
  std::size_t n = 0;
  for (auto at = text.find(needle); at != text.npos; at = text.find(needle, at + needle.size()))
    ++n;
  return n;
}

// A PARAMS header that claims `length` content bytes, whatever follows it.
std::string lying_params_header(std::uint16_t id, std::size_t length) {
  std::string header;
  fcgi_host::records::append_header(header, RecordType::Params, id, length);
  return header;
}

// The host closes without a word: EOF within kHostileWait, nothing sent.
void check_closed_silently(Client& c) {
  fcgi_test::ReadAllResult all = c.read_until_closed(kHostileWait);
  CHECK(all.status == IoStatus::Closed);
  CHECK(all.data.empty());
}

// The host answers `status` to request `id` with a CGI page and FCGI_END_REQUEST, then closes.
void check_refused(Client& c, std::uint16_t id, int status) {
  fcgi_test::Response r = c.read_response(id);
  CHECK(r.ended);
  CHECK(r.status == status);
  CHECK(r.protocol_status == fcgi_test::kRequestComplete);
  CHECK(c.read_until_closed(kHostileWait).status == IoStatus::Closed);
}

} // namespace

TEST_SUITE("hostile input") {

  REQUEST_PATH_CASE(
      "a burst of bad connections: 10 lines, then the count of the rest, unprompted") {
    Hostile h;
    for (int i = 0; i < 15; ++i) {
      Client c = h.connect();
      c.send_raw("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
      check_closed_silently(c);
    }
    // No further error comes: the worker still writes the count of what it held back.
    CHECK(it::wait_for(
        [&] { return !it::lines_with(h.host.log(), "5 more client errors not logged").empty(); },
        Millis{3000}));
    CHECK(it::lines_with(h.host.log(), "HTTP spoken").size() == 10);
    h.check_still_serves(15);
  }

  REQUEST_PATH_CASE("wrong version: closed without an answer") {
    Hostile h;
    Client c = h.connect();
    c.send_raw(fcgi_test::encode_record(1, 1, fcgi_test::begin_request_body(), 0, /*version=*/2));
    check_closed_silently(c);
    h.check_still_serves(1);
    CHECK(it::lines_with(h.host.log(), "FastCGI version 2").size() == 1);
  }

  REQUEST_PATH_CASE("truncated record, then the client closes: connection dropped") {
    Hostile h;
    Client c = h.connect();
    std::string params =
        fcgi_test::encode_stream(RecordType::Params, 1, fcgi_test::encode_params(get_params("/t")));
    c.send_raw(begin(1) + params.substr(0, 13)); // a PARAMS record cut in its content
    ::shutdown(c.fd(), SHUT_WR);
    check_closed_silently(c);
    h.check_still_serves(1);
    CHECK(it::lines_with(h.host.log(), "mid-request").size() == 1);
  }

  REQUEST_PATH_CASE("lying content length: BEGIN_REQUEST of 16 bytes is closed") {
    Hostile h;
    Client c = h.connect();
    c.send_raw(fcgi_test::encode_record(RecordType::BeginRequest, 1,
                                        fcgi_test::begin_request_body() + std::string(8, '\0')));
    check_closed_silently(c);
    h.check_still_serves(1);
  }

  REQUEST_PATH_CASE(
      "lying content length: a record longer than what is sent is cut at header-timeout") {
    Hostile h;
    Client c = h.connect();
    std::string pairs = fcgi_test::encode_params(get_params("/lie"));
    std::string header = lying_params_header(1, 1000); // only the pairs follow
    auto start = std::chrono::steady_clock::now();
    c.send_raw(begin(1) + header + pairs);
    fcgi_test::ReadAllResult all = c.read_until_closed(Millis{4000});
    auto waited = std::chrono::steady_clock::now() - start;
    CHECK(all.status == IoStatus::Closed);
    CHECK(all.data.empty());
    CHECK(waited >= 900ms);
    CHECK(waited < 3000ms);
    h.check_still_serves(1);
    CHECK(it::lines_with(h.host.log(), "--header-timeout").size() == 1);
  }

  REQUEST_PATH_CASE("lying content length: a PARAMS length swallowing the next records") {
    Hostile h;
    Client c = h.connect();
    std::string pairs = fcgi_test::encode_params(get_params("/lie"));
    // The header claims 16 bytes more than the pairs: the empty PARAMS and the empty STDIN
    // become pair bytes, which then run past the params stream (400).
    std::string header = lying_params_header(1, pairs.size() + 16);
    c.send_raw(begin(1) + header + pairs + fcgi_test::encode_record(RecordType::Params, 1, "") +
               fcgi_test::encode_record(RecordType::Stdin, 1, "") +
               fcgi_test::encode_record(RecordType::Params, 1, "") +
               fcgi_test::encode_record(RecordType::Stdin, 1, ""));
    check_refused(c, 1, 400);
    h.check_still_serves(1);
  }

  REQUEST_PATH_CASE("garbage bytes: closed without an answer") {
    Hostile h;
    std::string garbage = it::pattern_body(4096);
    garbage[0] = '\xde'; // not version 1
    Client c = h.connect();
    c.send_raw(garbage);
    check_closed_silently(c);
    // Version 1, but an unknown type for a request never begun.
    Client d = h.connect();
    d.send_raw(fcgi_test::encode_record(0xee, 7, "garbage!"));
    check_closed_silently(d);
    h.check_still_serves(2);
  }

  REQUEST_PATH_CASE("HTTP spoken to the socket: closed without an answer, logged as such") {
    Hostile h;
    Client c = h.connect();
    c.send_raw("GET / HTTP/1.1\r\nHost: localhost\r\nConnection: keep-alive\r\n\r\n");
    check_closed_silently(c);
    h.check_still_serves(1);
    CHECK(it::lines_with(h.host.log(), "HTTP spoken to the FastCGI socket").size() == 1);
  }

  REQUEST_PATH_CASE("records before BEGIN_REQUEST: closed") {
    Hostile h;
    Client c = h.connect();
    c.send_raw(fcgi_test::encode_stream(RecordType::Params, 1,
                                        fcgi_test::encode_params(get_params("/x"))));
    check_closed_silently(c);
    Client d = h.connect();
    d.send_raw(fcgi_test::encode_stream(RecordType::Stdin, 1, "body"));
    check_closed_silently(d);
    h.check_still_serves(2);
    CHECK(it::lines_with(h.host.log(), "outside any request").size() == 2);
  }

  REQUEST_PATH_CASE("huge name-value length fields (0x7ffffffe): 400") {
    Hostile h;
    const std::string huge = "\xff\xff\xff\xfe";
    for (bool in_value : {false, true}) {
      CAPTURE(in_value);
      std::string pair = in_value ? "\x01" + huge + "X" : huge + "\x01" + "X";
      Client c = h.connect();
      c.send_raw(begin(1) + fcgi_test::encode_stream(RecordType::Params, 1, pair) +
                 fcgi_test::encode_record(RecordType::Stdin, 1, ""));
      check_refused(c, 1, 400);
    }
    h.check_still_serves(2);
  }

  REQUEST_PATH_CASE("GET_VALUES naming variables several times: each answered once, MPXS_CONNS=0") {
    Hostile h;
    Client c = h.connect();
    Params query;
    for (int i = 0; i < 4; ++i)
      for (const char* name : {"FCGI_MAX_CONNS", "FCGI_MAX_REQS", "FCGI_MPXS_CONNS"})
        query.emplace_back(name, "");
    query.emplace_back("NOT_A_VARIABLE", "");
    std::string body = fcgi_test::encode_params(query);
    for (std::uint8_t padding : {std::uint8_t{0}, std::uint8_t{7}}) {
      CAPTURE(int(padding));
      c.send_raw(fcgi_test::encode_record(RecordType::GetValues, 0, body, padding));
      fcgi_test::RecordResult rr = c.read_record(kHostileWait);
      REQUIRE(rr.status == IoStatus::Ok);
      CHECK(rr.record.type == RecordType::GetValuesResult);
      CHECK(rr.record.request_id == 0);
      Params got = fcgi_test::decode_params(rr.record.content);
      REQUIRE(got.size() == 3);
      CHECK(got[0] == std::pair<std::string, std::string>{"FCGI_MAX_CONNS", "256"});
      // One worker: as many requests at once as it has handler threads.
      CHECK(got[1] == std::pair<std::string, std::string>{
                          "FCGI_MAX_REQS", std::to_string(it::request_path_threads())});
      CHECK(got[2] == std::pair<std::string, std::string>{"FCGI_MPXS_CONNS", "0"});
    }
    // The connection stays usable.
    fcgi_test::Response r = c.request("GET", "/same");
    CHECK(r.status == 200);
    h.check_still_serves(0);
  }

  REQUEST_PATH_CASE("unknown management types: FCGI_UNKNOWN_TYPE, connection kept") {
    Hostile h;
    Client c = h.connect();
    for (std::uint8_t type : {0, 1, 3, 6, 11, 12, 0x7f, 0xff}) {
      CAPTURE(int(type));
      c.send_raw(fcgi_test::encode_record(type, 0, "12345678", 3));
      fcgi_test::RecordResult rr = c.read_record(kHostileWait);
      REQUIRE(rr.status == IoStatus::Ok);
      CHECK(rr.record.type == RecordType::UnknownType);
      CHECK(rr.record.request_id == 0);
      REQUIRE(rr.record.content.size() == 8);
      CHECK(static_cast<std::uint8_t>(rr.record.content[0]) == type);
      CHECK(rr.record.content.substr(1) == std::string(7, '\0'));
    }
    CHECK(c.request("GET", "/same").status == 200);
    h.check_still_serves(0);
  }

  REQUEST_PATH_CASE("a flood of 10 000 management records: cut, worker alive") {
    Hostile h({"--max-records", "100000"}); // the cap on management records applies first
    Client c = h.connect();
    std::string flood;
    for (int i = 0; i < 10'000; ++i)
      flood += fcgi_test::encode_record(0x42, 0, "");
    try {
      c.send_raw(flood);
    } catch (const fcgi_test::Error&) {
      // The host closed before taking everything: what it answered may still be readable.
    }
    fcgi_test::ReadAllResult all = c.read_until_closed(Millis{10000});
    auto answers = split_records(all.data);
    CHECK(answers.size() <= 10'000);
    for (auto& r : answers)
      CHECK(r.type == RecordType::UnknownType);
    CHECK((all.status == IoStatus::Closed || answers.size() == 10'000));
    CHECK(all.status == IoStatus::Closed);
    CHECK(answers.size() <= 1000); // the per-connection cap on management records
    h.check_still_serves(1);
    CHECK(it::lines_with(h.host.log(), "management records").size() == 1);
  }

  REQUEST_PATH_CASE("NUL bytes in a param name or value: 400") {
    Hostile h;
    Params bad_name = get_params("/nul");
    bad_name.emplace_back(std::string("HTTP_X\0Y", 8), "v");
    Params bad_value = get_params("/nul");
    bad_value.emplace_back("HTTP_X", std::string("a\0b", 3));
    for (const Params& params : {bad_name, bad_value}) {
      Client c = h.connect();
      c.send_raw(raw_request(1, params, ""));
      check_refused(c, 1, 400);
    }
    h.check_still_serves(2);
  }

  REQUEST_PATH_CASE("duplicate header params: served, the last one wins, both reach the handler") {
    Hostile h;
    Params params = get_params("/dup");
    params.emplace_back("HTTP_X_DUP", "1");
    params.emplace_back("HTTP_X_DUP", "2");
    Client c = h.connect();
    c.send_raw(raw_request(1, params, ""));
    fcgi_test::Response r = c.read_response(1);
    CHECK(r.ended);
    CHECK(r.status == 200);
    CHECK(r.body.find("param HTTP_X_DUP=1\nparam HTTP_X_DUP=2\n") != std::string::npos);
    h.check_still_serves(0);
  }

  REQUEST_PATH_CASE(
      "an interpreted param twice: two values are a 400, one value reaches the handler once") {
    Hostile h;
    struct Case {
      std::string name, first, second, body;
    };
    // CONTENT_LENGTH 3 then 10, with 10 or with 3 body bytes: neither value may decide.
    for (const Case& k :
         {Case{"CONTENT_LENGTH", "3", "10", "0123456789"}, Case{"CONTENT_LENGTH", "3", "10", "012"},
          Case{"REQUEST_URI", "/first", "/second", ""}, Case{"QUERY_STRING", "a=1", "a=2", ""}}) {
      CAPTURE(k.name);
      CAPTURE(k.body.size());
      Params params = fcgi_test::standard_params("POST", "/dup", 0, {{k.name, k.first}});
      params.emplace_back(k.name, k.second);
      Client c = h.connect();
      c.send_raw(raw_request(1, params, k.body));
      check_refused(c, 1, 400);
    }
    CHECK(it::lines_with(h.host.log(), "sent twice").size() == 4);
    Params same = fcgi_test::standard_params("POST", "/dup", 5);
    same.emplace_back("CONTENT_LENGTH", "5");
    Client c = h.connect();
    c.send_raw(raw_request(1, same, "hello"));
    fcgi_test::Response r = c.read_response(1);
    CHECK(r.status == 200);
    CHECK(count_of(r.body, "param CONTENT_LENGTH=") == 1);
    CHECK(r.body.ends_with("\n\nhello"));
    h.check_still_serves(4);
  }

  REQUEST_PATH_CASE(
      "CONTENT_LENGTH absent, empty or -1 (a chunked upload): the whole body, its length") {
    Hostile h;
    std::string body(20'000, 'c');
    for (const char* length : std::initializer_list<const char*>{"-1", "", nullptr}) {
      CAPTURE((length ? length : "(absent)"));
      Params params = fcgi_test::standard_params("POST", "/chunked", 0);
      std::erase_if(params, [](const auto& p) { return p.first == "CONTENT_LENGTH"; });
      if (length) params.emplace_back("CONTENT_LENGTH", length);
      Client c = h.connect();
      // In STDIN records of 4 KiB, as a chunked upload arrives.
      c.send_raw(begin(1) +
                 fcgi_test::encode_stream(RecordType::Params, 1, fcgi_test::encode_params(params)) +
                 fcgi_test::encode_stream(RecordType::Stdin, 1, body, 4096));
      fcgi_test::Response r = c.read_response(1);
      CHECK(r.status == 200);
      // The handler sees the real length, once, and the body up to the empty STDIN record.
      CHECK(count_of(r.body, "param CONTENT_LENGTH=") == 1);
      CHECK(r.body.find("param CONTENT_LENGTH=20000\n") != std::string::npos);
      CHECK(r.body.ends_with("\n\n" + body));
    }
    h.check_still_serves(0);
  }

  REQUEST_PATH_CASE("CONTENT_LENGTH disagreeing with the body: 400") {
    Hostile h;
    struct Case {
      std::string content_length, body;
    };
    for (const Case& k : {Case{"10", "12345"}, Case{"5", "1234567890"}, Case{"12x", "12"},
                          Case{"-2", ""}, Case{"99999999999999999999", ""}}) {
      CAPTURE(k.content_length);
      Params params = fcgi_test::standard_params("POST", "/cl", k.body.size(),
                                                 {{"CONTENT_LENGTH", k.content_length}});
      Client c = h.connect();
      c.send_raw(raw_request(1, params, k.body));
      check_refused(c, 1, 400);
    }
    h.check_still_serves(5);
  }

  REQUEST_PATH_CASE("body over --max-body: 413") {
    Hostile h;
    std::string body(100 * 1024, 'b');
    // Announced by CONTENT_LENGTH: refused after the params.
    Client c = h.connect();
    c.send_raw(raw_request(1, fcgi_test::standard_params("POST", "/big", body.size()), body));
    check_refused(c, 1, 413);
    // Not announced: refused when the STDIN records pass the limit.
    Params no_length = fcgi_test::standard_params("POST", "/big", 0);
    Client d = h.connect();
    d.send_raw(raw_request(1, no_length, body));
    check_refused(d, 1, 413);
    h.check_still_serves(2);
  }

  REQUEST_PATH_CASE("params over --max-params-size: 400, more than --max-params: 400") {
    Hostile h;
    Client c = h.connect();
    c.send_raw(
        raw_request(1, get_params("/p"), "").substr(0, 16) +
        fcgi_test::encode_stream(RecordType::Params, 1,
                                 fcgi_test::encode_name_value("HTTP_BIG", std::string(5000, 'v'))) +
        fcgi_test::encode_record(RecordType::Stdin, 1, ""));
    check_refused(c, 1, 400);
    Params many = get_params("/p");
    for (int i = 0; i < 64; ++i)
      many.emplace_back("HTTP_X_" + std::to_string(i), "v");
    Client d = h.connect();
    d.send_raw(raw_request(1, many, ""));
    check_refused(d, 1, 400);
    h.check_still_serves(2);
  }

  REQUEST_PATH_CASE("too many records in one request: closed") {
    Hostile h;
    Client c = h.connect();
    std::string body(100, 'r'); // 100 one-byte STDIN records, over --max-records 64
    std::string bytes =
        begin(1) +
        fcgi_test::encode_stream(RecordType::Params, 1, fcgi_test::encode_params(get_params("/r")));
    bytes += fcgi_test::encode_stream(RecordType::Stdin, 1, body, 1);
    c.send_raw(bytes);
    check_closed_silently(c);
    h.check_still_serves(1);
    CHECK(it::lines_with(h.host.log(), "more than 64 records").size() == 1);
  }

  REQUEST_PATH_CASE("a second BEGIN_REQUEST on one connection: FCGI_CANT_MPX_CONN") {
    Hostile h;
    std::string one_params = fcgi_test::encode_record(RecordType::Params, 1,
                                                      fcgi_test::encode_params(get_params("/one")));
    std::string one_end = fcgi_test::encode_record(RecordType::Params, 1, "") +
                          fcgi_test::encode_record(RecordType::Stdin, 1, "");
    auto check_cant_mpx = [](Client& c, std::uint16_t id) {
      fcgi_test::RecordResult rr = c.read_record(kHostileWait);
      REQUIRE(rr.status == IoStatus::Ok);
      CHECK(rr.record.type == RecordType::EndRequest);
      CHECK(rr.record.request_id == id);
      CHECK(fcgi_test::decode_end_request(rr.record.content).protocol_status ==
            fcgi_test::kCantMpxConn);
    };
    // A BEGIN_REQUEST while request 1 is in progress is refused; request 1 is then served.
    Client c = h.connect();
    c.send_raw(begin(1) + one_params + begin(2));
    check_cant_mpx(c, 2);
    c.send_raw(one_end);
    fcgi_test::Response r = c.read_response(1);
    CHECK(r.status == 200);
    CHECK(r.body.find("path=/one\n") != std::string::npos);

    // A whole second request interleaved: refused, and its other records ignored (FastCGI 1.0,
    // 3.3: records of an inactive request id are ignored); request 1 is served.
    Client d = h.connect();
    d.send_raw(begin(1) + one_params + raw_request(2, get_params("/two"), "") + one_end);
    check_cant_mpx(d, 2);
    fcgi_test::Response r1 = d.read_response(1);
    CHECK(r1.status == 200);
    CHECK(r1.body.find("path=/one\n") != std::string::npos);

    // The same request id begun twice: closed.
    Client e = h.connect();
    e.send_raw(begin(1) + begin(1));
    check_closed_silently(e);
    h.check_still_serves(2);
  }

  REQUEST_PATH_CASE("roles AUTHORIZER and FILTER: FCGI_UNKNOWN_ROLE, then closed") {
    Hostile h;
    for (Role role : {Role::Authorizer, Role::Filter}) {
      CAPTURE(int(role));
      Client c = h.connect();
      c.send_raw(
          fcgi_test::encode_record(RecordType::BeginRequest, 1,
                                   fcgi_test::begin_request_body(role, fcgi_test::kKeepConn)) +
          fcgi_test::encode_stream(RecordType::Params, 1,
                                   fcgi_test::encode_params(get_params("/role"))) +
          fcgi_test::encode_record(RecordType::Stdin, 1, ""));
      fcgi_test::RecordResult rr = c.read_record(kHostileWait);
      REQUIRE(rr.status == IoStatus::Ok);
      CHECK(rr.record.type == RecordType::EndRequest);
      CHECK(rr.record.request_id == 1);
      CHECK(fcgi_test::decode_end_request(rr.record.content).protocol_status ==
            fcgi_test::kUnknownRole);
      fcgi_test::ReadAllResult rest = c.read_until_closed(kHostileWait);
      CHECK(rest.status == IoStatus::Closed);
      CHECK(rest.data.empty());
    }
    h.check_still_serves(2);
  }

  REQUEST_PATH_CASE("ABORT_REQUEST before the end of STDIN: END_REQUEST, the handler never runs") {
    Hostile h;
    Client c = h.connect();
    std::string body = "partial body";
    c.send_raw(begin(1, fcgi_test::kKeepConn) +
               fcgi_test::encode_stream(
                   RecordType::Params, 1,
                   fcgi_test::encode_params(fcgi_test::standard_params("POST", "/aborted", 100))) +
               fcgi_test::encode_record(RecordType::Stdin, 1, body));
    c.abort_request(1);
    fcgi_test::RecordResult rr = c.read_record(kHostileWait);
    REQUIRE(rr.status == IoStatus::Ok);
    CHECK(rr.record.type == RecordType::EndRequest); // no STDOUT first: the handler did not run
    CHECK(rr.record.request_id == 1);
    CHECK(fcgi_test::decode_end_request(rr.record.content).protocol_status ==
          fcgi_test::kRequestComplete);
    // A kept connection goes on serving.
    fcgi_test::Response r = c.request("GET", "/next");
    CHECK(r.status == 200);
    h.check_still_serves(0);
  }

  REQUEST_PATH_CASE("legal but unusual framing is served") {
    Hostile h({"--max-body", "1M", "--max-params-size", "64K", "--max-records", "1000"});
    SUBCASE("padding 255 on every record") {
      std::string body = it::pattern_body(3000);
      Params params = fcgi_test::standard_params("POST", "/pad", body.size());
      Client c = h.connect();
      c.send_raw(
          fcgi_test::encode_record(RecordType::BeginRequest, 1, fcgi_test::begin_request_body(),
                                   255) +
          fcgi_test::encode_record(RecordType::Params, 1, fcgi_test::encode_params(params), 255) +
          fcgi_test::encode_record(RecordType::Params, 1, "", 255) +
          fcgi_test::encode_record(RecordType::Stdin, 1, body, 255) +
          fcgi_test::encode_record(RecordType::Stdin, 1, "", 255));
      fcgi_test::Response r = c.read_response(1);
      CHECK(r.status == 200);
      CHECK(it::ends_with(r.body, "\n\n" + body));
    }
    SUBCASE("65535-byte records: params and body") {
      std::string body = it::pattern_body(3 * 65535 + 7);
      Params params = fcgi_test::standard_params("POST", "/big-records", body.size());
      std::size_t base = fcgi_test::encode_params(params).size();
      params.emplace_back("HTTP_X_FILL", std::string(65535 - base - 1 - 4 - 11, 'f'));
      std::string pairs = fcgi_test::encode_params(params);
      REQUIRE(pairs.size() == 65535);
      Client c = h.connect();
      c.send_raw(begin(1) + fcgi_test::encode_stream(RecordType::Params, 1, pairs) +
                 fcgi_test::encode_stream(RecordType::Stdin, 1, body));
      fcgi_test::Response r = c.read_response(1);
      CHECK(r.status == 200);
      CHECK(r.body.find("param HTTP_X_FILL=fff") != std::string::npos);
      CHECK(it::ends_with(r.body, "\n\n" + body));
    }
    SUBCASE("name-value pairs and their length fields split across records") {
      Params params = get_params("/split");
      params.emplace_back("HTTP_X_LONG", std::string(300, 'L')); // a 4-byte value length
      for (std::size_t chunk : {1u, 3u, 7u}) {
        CAPTURE(chunk);
        Client c = h.connect();
        c.send_raw(begin(1) +
                   fcgi_test::encode_stream(RecordType::Params, 1, fcgi_test::encode_params(params),
                                            chunk) +
                   fcgi_test::encode_stream(RecordType::Stdin, 1, ""));
        fcgi_test::Response r = c.read_response(1);
        CHECK(r.status == 200);
        CHECK(r.body.find("path=/split\n") != std::string::npos);
        CHECK(r.body.find("param HTTP_X_LONG=" + std::string(300, 'L') + "\n") !=
              std::string::npos);
      }
    }
    SUBCASE("management records between the records of a request") {
      Client c = h.connect();
      std::string get_values = fcgi_test::encode_record(
          RecordType::GetValues, 0, fcgi_test::encode_name_value("FCGI_MPXS_CONNS", ""));
      std::string pairs = fcgi_test::encode_params(get_params("/between"));
      c.send_raw(begin(1, fcgi_test::kKeepConn) + get_values +
                 fcgi_test::encode_record(RecordType::Params, 1, pairs) + get_values +
                 fcgi_test::encode_record(RecordType::Params, 1, "") + get_values +
                 fcgi_test::encode_record(RecordType::Stdin, 1, ""));
      int results = 0;
      fcgi_test::Response r = c.read_response(1); // skips the management answers
      CHECK(r.status == 200);
      CHECK(r.body.find("path=/between\n") != std::string::npos);
      (void)results;
    }
    SUBCASE("a pipelined request in the same write as the first") {
      Client c = h.connect();
      c.send_raw(raw_request(1, get_params("/p1"), "", fcgi_test::kKeepConn) +
                 raw_request(2, get_params("/p2"), "body2", fcgi_test::kKeepConn));
      fcgi_test::Response r1 = c.read_response(1);
      fcgi_test::Response r2 = c.read_response(2);
      CHECK(r1.status == 200);
      CHECK(r1.body.find("path=/p1\n") != std::string::npos);
      CHECK(r2.status == 200);
      CHECK(r2.body.find("path=/p2\n") != std::string::npos);
    }
    h.check_still_serves(0);
  }

  REQUEST_PATH_CASE(
      "1000 malformed connections: same worker, RSS growth < 1 MiB, bounded logging") {
    // ASan's quarantine keeps freed memory resident by design: off for this host, so that RSS
    // shows what the host keeps, not what the sanitizer holds back.
    std::string asan = std::getenv("ASAN_OPTIONS") ? std::getenv("ASAN_OPTIONS") : "";
    it::ScopedEnv env("ASAN_OPTIONS", asan + (asan.empty() ? "" : ":") +
                                          "quarantine_size_mb=0:thread_local_quarantine_size_kb=0");
    Hostile h;
    const std::string huge_pair = std::string("\xff\xff\xff\xfe") + "\x01" + "X";
    Params dup_values{{"FCGI_MAX_CONNS", ""}, {"FCGI_MAX_CONNS", ""}, {"FCGI_MPXS_CONNS", ""}};
    const std::vector<std::string> inputs = {
        fcgi_test::encode_record(1, 1, fcgi_test::begin_request_body(), 0, 2),
        "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n",
        begin(1) + fcgi_test::encode_stream(RecordType::Params, 1, huge_pair) +
            fcgi_test::encode_record(RecordType::Stdin, 1, ""),
        fcgi_test::encode_record(RecordType::GetValues, 0, fcgi_test::encode_params(dup_values)) +
            fcgi_test::encode_record(0x33, 0, "x") + "\x01\x05",
        raw_request(1, fcgi_test::standard_params("POST", "/big", 1 << 20), ""),
    };
    auto run = [&](int n) {
      auto deadline = std::chrono::steady_clock::now() + 40s;
      int done = 0;
      for (; done < n && std::chrono::steady_clock::now() < deadline; ++done) {
        Client c = h.connect();
        c.send_raw(inputs[static_cast<std::size_t>(done) % inputs.size()]);
        if (done % inputs.size() == 3) ::shutdown(c.fd(), SHUT_WR); // a torn record, then EOF
        auto all = c.read_until_closed(kHostileWait);
        if (all.status != IoStatus::Closed) FAIL_CHECK("not closed: input " << done % 5);
      }
      return done;
    };
    REQUIRE(run(100) == 100); // warm-up: buffers and caches reach their size
    long before = it::rss_kib(h.worker);
    REQUIRE(run(1000) == 1000);
    long after = it::rss_kib(h.worker);
    INFO("worker VmRSS " << before << " kB -> " << after << " kB");
    CHECK(before > 0);
    CHECK(after - before < 1024);
    // One more, after the rate limiter's one-second window: it reports what it held back.
    REQUIRE(run(1) == 1);
    h.check_still_serves(1101);
    // Every bad connection but the GET_VALUES one (it ends between requests) is worth one line:
    // written, or counted in a "N more client errors not logged" line (which comes when its
    // window ends, even with no further error).
    std::size_t written = 0, held_back = 0;
    auto count = [&] {
      written = held_back = 0;
      for (const std::string& line : it::lines_with(h.host.log(), "[warn]")) {
        std::size_t at = line.find(" more client errors not logged");
        if (at == std::string::npos) {
          ++written;
          continue;
        }
        std::size_t start = line.find_last_of(' ', at - 1) + 1;
        held_back += std::stoul(line.substr(start, at - start));
      }
      return written + held_back == 881;
    };
    CHECK(it::wait_for(count, Millis{10000}));
    INFO("lines written " << written << ", held back " << held_back);
    CHECK(written + held_back == 881);
    CHECK(written < 40); // a burst, then counts only while the flood goes on
  }
}
