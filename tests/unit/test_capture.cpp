// A captured request (--capture-crashes): names matched by the redaction patterns, records cut
// to fit the capture, values redacted in place keeping their length (params split across
// records, urlencoded form fields, names too long to compare), and the capture file read back
// for the replay, with its errors; the line the crash block gets.
#include "fcgi_host/observe/host_slot.hpp"
#include "fcgi_host/protocol/capture_file.hpp"
#include "fcgi_host/protocol/capture_redaction.hpp"
#include "fcgi_host/protocol/records.hpp"
#include "process_manager/crash_report.hpp"
#include "process_manager/scoreboard.hpp"

#include <doctest/doctest.h>
#include <string>
#include <utility>
#include <vector>

using namespace fcgi_host;
namespace records = fcgi_host::records;

namespace {

using Params = std::vector<std::pair<std::string, std::string>>;

std::string encode_params(const Params& params) {
  std::string out;
  for (const auto& [name, value] : params)
    records::append_name_value(out, name, value);
  return out;
}

// A request's records: params in records of at most `chunk` bytes, then the body.
std::string request(const Params& params, const std::string& body = {},
                    std::size_t chunk = records::kMaxContent) {
  std::string out;
  records::append_begin_request(out, 1, records::Role::Responder);
  records::append_stream(out, records::Type::Params, 1, encode_params(params), chunk, 3);
  records::append_stream(out, records::Type::Stdin, 1, body, chunk);
  return out;
}

// Fits and redacts `bytes` as the worker does, with these patterns beside the built-in ones.
capture::RedactionReport redact(std::string& bytes, std::vector<std::string> patterns = {}) {
  capture::CaptureShape shape = capture::fit_records(bytes.data(), bytes.size());
  REQUIRE(shape.size == bytes.size());
  capture::RedactionReport report;
  capture::redact_records(bytes.data(), shape.size, patterns, report);
  return report;
}

capture::CapturedRequest read_back(const std::string& records_bytes) {
  return capture::read_capture(std::string(capture::kFileMagic) + "\ntime: t\n\n" + records_bytes);
}

} // namespace

TEST_CASE("redaction patterns: * and ?, letters in any case, the whole name") {
  CHECK(capture::name_matches("HTTP_COOKIE", "HTTP_COOKIE"));
  CHECK(capture::name_matches("http_cookie", "HTTP_Cookie"));
  CHECK_FALSE(capture::name_matches("HTTP_COOKIE", "HTTP_COOKIES"));
  CHECK(capture::name_matches("*PASSWORD*", "HTTP_X_PASSWORD_HINT"));
  CHECK(capture::name_matches("*PASSWORD*", "password"));
  CHECK(capture::name_matches("HTTP_X_?ID", "HTTP_X_SID"));
  CHECK_FALSE(capture::name_matches("HTTP_X_?ID", "HTTP_X_ID"));
  CHECK(capture::name_matches("*a*b*c", "xxaxxbxxbxc"));
  CHECK_FALSE(capture::name_matches("*a*b*c", "xxaxxbxxbx"));
  CHECK(capture::name_matches("*", ""));
}

TEST_CASE("the built-in patterns redact cookies, authorization and secrets, keeping the length") {
  std::string bytes = request({{"REQUEST_URI", "/a?b=1"},
                               {"HTTP_COOKIE", "sid=s3cr3t"},
                               {"HTTP_AUTHORIZATION", "Bearer abc"},
                               {"HTTP_X_CSRF_TOKEN", "t0k"},
                               {"HTTP_USER_AGENT", "curl"}});
  const std::size_t size = bytes.size();
  capture::RedactionReport report = redact(bytes);
  CHECK(bytes.size() == size);
  capture::CapturedRequest r = read_back(bytes);
  CHECK(r.param("REQUEST_URI") == "/a?b=1");
  CHECK(r.param("HTTP_COOKIE") == "xxxxxxxxxx");
  CHECK(r.param("HTTP_AUTHORIZATION") == "xxxxxxxxxx");
  CHECK(r.param("HTTP_X_CSRF_TOKEN") == "xxx");
  CHECK(r.param("HTTP_USER_AGENT") == "curl");
  CHECK(report.redacted == 3);
  CHECK(report.names_text() == "HTTP_COOKIE HTTP_AUTHORIZATION HTTP_X_CSRF_TOKEN");
}

TEST_CASE("a param split across PARAMS records is redacted all the same, and patterns add") {
  // Records of 5 bytes: every name, length and value is cut somewhere.
  Params params = {{"REQUEST_URI", "/x"},
                   {"HTTP_X_SESSION_ID", std::string(300, 'v')}, // a 4-byte length
                   {"HTTP_COOKIE", "a=b"}};
  std::string bytes = request(params, {}, 5);
  redact(bytes, {"http_x_session*"});
  capture::CapturedRequest r = read_back(bytes);
  CHECK(r.param("REQUEST_URI") == "/x");
  CHECK(r.param("HTTP_X_SESSION_ID") == std::string(300, 'x'));
  CHECK(r.param("HTTP_COOKIE") == "xxx");
}

TEST_CASE("a name too long to compare has its value redacted") {
  std::string bytes = request({{std::string(300, 'N'), "value"}, {"SHORT", "kept"}});
  capture::RedactionReport report = redact(bytes);
  capture::CapturedRequest r = read_back(bytes);
  CHECK(r.param(std::string(300, 'N')) == "xxxxx");
  CHECK(r.param("SHORT") == "kept");
  CHECK(report.redacted == 1);
}

TEST_CASE("an urlencoded form body: matching fields redacted, names percent-decoded") {
  std::string body = "user=ann&password=hunter2&pass%77ord=x1&note=a%26b&api_key=k";
  Params params = {{"CONTENT_TYPE", "Application/X-WWW-Form-Urlencoded; charset=utf-8"},
                   {"CONTENT_LENGTH", std::to_string(body.size())}};
  std::string bytes = request(params, body, 7);
  capture::RedactionReport report = redact(bytes);
  capture::CapturedRequest r = read_back(bytes);
  CHECK(r.body == "user=ann&password=xxxxxxx&pass%77ord=xx&note=a%26b&api_key=x");
  CHECK(report.names_text() == "form:password form:password form:api_key");
}

// A token in a URL is as secret as in a form: QUERY_STRING and REQUEST_URI's query, by the same
// names, split across records too.
TEST_CASE("the query's fields are redacted by the forms' rules, in QUERY_STRING and REQUEST_URI") {
  Params params = {{"QUERY_STRING", "password=x&api_token=y&page=2&pass%77d=z"},
                   {"REQUEST_URI", "/login?password=x&api_token=y&page=2"},
                   {"DOCUMENT_URI", "/login"},
                   {"HTTP_X_NOTE", "password=kept"}};
  std::string bytes = request(params, {}, 5);
  capture::RedactionReport report = redact(bytes);
  capture::CapturedRequest r = read_back(bytes);
  CHECK(r.param("QUERY_STRING") == "password=x&api_token=x&page=2&pass%77d=x");
  CHECK(r.param("REQUEST_URI") == "/login?password=x&api_token=x&page=2");
  CHECK(r.param("HTTP_X_NOTE") == "password=kept"); // a header's text is no query
  CHECK(report.names_text() ==
        "query:password query:api_token query:passwd query:password query:api_token");
  CHECK(bytes.find("api_token=y") == std::string::npos);

  std::string uri = "/a?token=abc&x=1&secret";
  CHECK(capture::redact_uri_query(uri.data(), uri.size(), {}) == 1);
  CHECK(uri == "/a?token=xxx&x=1&secret");
  std::string no_query = "/password=1";
  CHECK(capture::redact_uri_query(no_query.data(), no_query.size(), {}) == 0);
  CHECK(no_query == "/password=1");
}

TEST_CASE("another body type is kept as it is") {
  std::string body = R"({"password":"hunter2"})";
  std::string bytes = request({{"CONTENT_TYPE", "application/json"}}, body);
  redact(bytes);
  CHECK(read_back(bytes).body == body);
}

TEST_CASE("fit_records: a body cut by the size cap ends in a shortened STDIN record") {
  std::string whole = request({{"REQUEST_URI", "/up"}}, std::string(1000, 'b'));
  std::string bytes = whole.substr(0, whole.size() - 600); // inside the STDIN record
  capture::CaptureShape shape = capture::fit_records(bytes.data(), bytes.size());
  CHECK(shape.params_end > 0);
  CHECK(shape.cut);
  CHECK_FALSE(shape.body_ended);
  CHECK(shape.size == bytes.size());
  std::string kept = bytes.substr(0, shape.size);
  records::append_record(kept, records::Type::Stdin, 1, {}); // what the worker closes it with
  capture::CapturedRequest r = read_back(kept);
  CHECK(r.body.size() == shape.body_bytes);
  CHECK(r.body == std::string(shape.body_bytes, 'b'));
}

TEST_CASE("fit_records: params cut by the size cap are not a capture") {
  std::string whole = request({{"REQUEST_URI", std::string(2000, 'u')}});
  std::string bytes = whole.substr(0, 1000);
  CHECK(capture::fit_records(bytes.data(), bytes.size()).params_end == 0);
}

TEST_CASE("read_capture refuses what is not a whole capture, saying where") {
  std::string good = request({{"REQUEST_URI", "/r"}}, "body");
  std::string head = std::string(capture::kFileMagic) + "\npid: 1\n\n";
  CHECK(capture::read_capture(head + good).body == "body");
  CHECK(capture::read_capture(head + good).field("pid") == "1");
  auto error = [](const std::string& file) {
    try {
      capture::read_capture(file);
    } catch (const capture::FileError& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  CHECK(error("GET / HTTP/1.1\r\n\r\n").starts_with("not a fcgi-host request capture"));
  CHECK(error(std::string(capture::kFileMagic) + "\npid: 1\n").starts_with("truncated"));
  CHECK(error(head + good.substr(0, good.size() - 3)).find("inside a record") != std::string::npos);
  CHECK(error(head + good.substr(0, good.size() - 8)).find("before the end of the body") !=
        std::string::npos);
  CHECK(error(head + good + "x").find("after the end of the request") != std::string::npos);
  std::string no_begin = good.substr(16); // BEGIN_REQUEST is 16 bytes
  CHECK(error(head + no_begin).find("where a request has BEGIN_REQUEST") != std::string::npos);
}

TEST_CASE("encode_request: the replay's request carries the params and body read back") {
  capture::CapturedRequest r = read_back(request({{"REQUEST_URI", "/e"}}, "abc"));
  r.set_param("HTTP_COOKIE", "sid=test");
  capture::CapturedRequest again = read_back(capture::encode_request(r));
  CHECK(again.params == r.params);
  CHECK(again.body == "abc");
}

TEST_CASE("crash block: the recorder's note is its line after the request's") {
  process_manager::Scoreboard sb(1, 1, fcgi_host::kHostArea);
  sb.prepare(0, 1);
  process_manager::WorkerSlot& s = sb.slot(0);
  s.state = process_manager::WorkerState::Idle;
  std::string note = "request captured to /var/crash/crash-1.fcgi";
  note.copy(s.crash_note, note.size());
  CHECK(process_manager::describe_crash(s, 0, "stack:\n#0 f") ==
        "  no request in flight: the worker was idle\n"
        "  request captured to /var/crash/crash-1.fcgi\n"
        "  stack:\n  #0 f");
}
