// The handler API's parsers: percent-decoding, query and form args, cookies in and out,
// multipart/form-data (split at every byte, spilled parts), spilled bodies, JSON.
#include "app/json.hpp"
#include "app/multipart.hpp"
#include "app/request.hpp"
#include "app/response.hpp"
#include "app/url_encoding.hpp"

#include <doctest/doctest.h>

#include <stdexcept>
#include <string>

namespace {

app::Request request_with(std::string query, std::string content_type = {},
                          std::string cookie = {}) {
  app::Request r;
  r.add_param("REQUEST_METHOD", "POST");
  r.add_param("REQUEST_URI", "/f?" + query);
  r.add_param("QUERY_STRING", query);
  if (!content_type.empty()) r.add_param("CONTENT_TYPE", content_type);
  if (!cookie.empty()) r.add_param("HTTP_COOKIE", cookie);
  r.finish_params();
  return r;
}

std::string multipart_body(const std::string& boundary) {
  return "preamble to ignore\r\n"
         "--" +
         boundary +
         "\r\n"
         "Content-Disposition: form-data; name=\"title\"\r\n"
         "\r\n"
         "Hello\r\nWorld\r\n"
         "--" +
         boundary +
         "\r\n"
         "Content-Disposition: form-data; filename=\"a;b.txt\"; name=\"file\"\r\n"
         "Content-Type: text/plain\r\n"
         "\r\n"
         "line one\r\n--not the boundary\r\n"
         "--" +
         boundary +
         "\r\n"
         "Content-Disposition: form-data; name=\"empty\"\r\n"
         "\r\n"
         "\r\n"
         "--" +
         boundary +
         "--\r\n"
         "epilogue";
}

void check_parts(std::vector<app::MultipartPart>& parts) {
  REQUIRE(parts.size() == 3);
  CHECK(parts[0].name == "title");
  CHECK(parts[0].data.contents() == "Hello\r\nWorld");
  CHECK_FALSE(parts[0].is_file());
  CHECK(parts[1].name == "file");
  CHECK(parts[1].filename == "a;b.txt");
  CHECK(parts[1].content_type == "text/plain");
  CHECK(parts[1].header("content-type") == "text/plain");
  CHECK(parts[1].data.contents() == "line one\r\n--not the boundary");
  CHECK(parts[2].name == "empty");
  CHECK(parts[2].data.empty());
}

} // namespace

TEST_CASE("percent-decoding: escapes, '+', malformed escapes kept, NUL") {
  using app::percent_decode;
  CHECK(percent_decode("Ann%20B") == "Ann B");
  CHECK(percent_decode("a+b", true) == "a b");
  CHECK(percent_decode("a+b", false) == "a+b");
  CHECK(percent_decode("%2B%2b", true) == "++");
  CHECK(percent_decode("%") == "%");
  CHECK(percent_decode("%4") == "%4");
  CHECK(percent_decode("100%") == "100%");
  CHECK(percent_decode("%zz%41") == "%zzA");
  CHECK(percent_decode("%%41") == "%A");
  CHECK(percent_decode("%00") == std::string(1, '\0'));
  CHECK(percent_decode("%C3%A9") == "\xC3\xA9");
  CHECK(app::percent_encode("a b/é~") == "a%20b%2F%C3%A9~");
}

TEST_CASE("query args: decoded, first wins, every value, raw still there") {
  app::Request r = request_with("name=Ann%20B&x=1&x=2&flag&&=v&e=&k%5B%5D=c%2B%2B+x");
  CHECK(r.query_arg("name") == "Ann B");
  CHECK(r.query_arg("x") == "1");
  CHECK(r.query_args("x") == std::vector<std::string_view>{"1", "2"});
  CHECK(r.query_args().has("flag"));
  CHECK(r.query_arg("flag").empty());
  CHECK(r.query_args().has("e"));
  CHECK_FALSE(r.query_args().has("missing"));
  CHECK(r.query_arg("") == "v");
  CHECK(r.query_arg("k[]") == "c++ x");
  CHECK(r.query() == "name=Ann%20B&x=1&x=2&flag&&=v&e=&k%5B%5D=c%2B%2B+x");
  CHECK(r.query_args().size() == 7);
  r.clear();
  CHECK(r.query_arg("name").empty());
}

TEST_CASE("form args: only for a form content type, kept apart from the query") {
  app::Request form = request_with("a=q", "application/x-www-form-urlencoded; charset=UTF-8");
  form.set_body("a=body&b=two+words&b=%21");
  CHECK(form.query_arg("a") == "q");
  CHECK(form.form_arg("a") == "body");
  CHECK(form.form_args("b") == std::vector<std::string_view>{"two words", "!"});
  app::Request other = request_with("", "text/plain");
  other.set_body("a=1");
  CHECK(other.form_args().size() == 0);
}

TEST_CASE("cookies: tolerant of malformed headers, first of duplicates wins") {
  app::Request r = request_with("", "", "a=1;b=2; sid=\"x y\";  flag; c=; =nameless; a=dup; d=%41");
  CHECK(r.cookie("a") == "1");
  CHECK(r.cookie("b") == "2");
  CHECK(r.cookie("sid") == "x y");
  CHECK_FALSE(r.has_cookie("flag"));
  CHECK(r.has_cookie("c"));
  CHECK(r.cookie("c").empty());
  CHECK(r.cookie("d") == "%41"); // as sent
  CHECK_FALSE(r.has_cookie("missing"));
  CHECK(app::find_cookie("", "a") == std::nullopt);
  CHECK(app::find_cookie(";;;", "a") == std::nullopt);
  CHECK(app::find_cookie("flag; sid=1", "sid") == "1");
  CHECK(app::find_cookie(std::string(100000, 'x') + "; k=v", "k") == "v");
}

TEST_CASE("Set-Cookie builder: attributes, and bad names or values refused") {
  app::Cookie c;
  c.name = "sid";
  c.value = "abc123";
  c.path = "/";
  c.domain = "example.org";
  c.max_age = 3600;
  c.expires = "Wed, 21 Oct 2026 07:28:00 GMT";
  c.http_only = true;
  c.same_site = app::Cookie::SameSite::Lax;
  CHECK(c.to_header() == "sid=abc123; Path=/; Domain=example.org; Max-Age=3600; "
                         "Expires=Wed, 21 Oct 2026 07:28:00 GMT; HttpOnly; SameSite=Lax");
  app::Cookie none{"a", "b"};
  none.same_site = app::Cookie::SameSite::None;
  CHECK(none.to_header() == "a=b; Secure; SameSite=None");
  for (std::string bad : {"a b", "a;b", "a\r\nSet-Cookie: x", "\"q\"", "a,b"}) {
    app::Cookie v{"n", bad};
    CHECK_THROWS_AS(v.to_header(), std::invalid_argument);
  }
  CHECK_THROWS_AS((app::Cookie{"bad name", "v"}.to_header()), std::invalid_argument);
  CHECK_THROWS_AS((app::Cookie{"", "v"}.to_header()), std::invalid_argument);
  app::Cookie path{"n", "v"};
  path.path = "/;\r\nX: y";
  CHECK_THROWS_AS(path.to_header(), std::invalid_argument);

  app::Response res;
  res.set_cookie(c);
  res.clear_cookie("old");
  REQUIRE(res.headers.size() == 2);
  CHECK(res.headers[1].second == "old=; Path=/; Max-Age=0");
}

TEST_CASE("redirect: the 3xx codes, a Location, CR/LF refused") {
  app::Response res;
  res.redirect("/login?next=%2F");
  CHECK(res.status == 302);
  CHECK(res.header("Location") == "/login?next=%2F");
  for (int code : {301, 303, 307, 308}) {
    app::Response r;
    r.redirect("https://example.org/", code);
    CHECK(r.status == code);
  }
  CHECK_THROWS_AS(res.redirect("/x", 200), std::invalid_argument);
  CHECK_THROWS_AS(res.redirect("/x\r\nSet-Cookie: a=b", 302), std::invalid_argument);
}

TEST_CASE("multipart: boundary from the content type") {
  CHECK(app::multipart_boundary("multipart/form-data; boundary=abc") == "abc");
  CHECK(app::multipart_boundary("Multipart/Form-Data; boundary=\"a b;c\"; charset=x") == "a b;c");
  CHECK(app::multipart_boundary("multipart/form-data; charset=utf-8; boundary=xyz") == "xyz");
  CHECK(app::multipart_boundary("text/plain; boundary=abc").empty());
  CHECK(app::multipart_boundary("multipart/form-data").empty());
  CHECK(app::multipart_boundary("multipart/form-data; boundary=" + std::string(71, 'a')).empty());
}

TEST_CASE("multipart: whole, and split in two at every offset") {
  const std::string boundary = "----b0undary";
  const std::string body = multipart_body(boundary);
  {
    app::MultipartParser p(boundary);
    CHECK(p.feed(body));
    REQUIRE(p.finish());
    check_parts(p.parts());
  }
  for (std::size_t cut = 0; cut <= body.size(); ++cut) {
    CAPTURE(cut);
    app::MultipartParser p(boundary);
    CHECK(p.feed(body.data(), cut));
    CHECK(p.feed(body.data() + cut, body.size() - cut));
    REQUIRE(p.finish());
    check_parts(p.parts());
  }
  app::MultipartParser bytewise(boundary);
  for (char c : body)
    REQUIRE(bytewise.feed(&c, 1));
  REQUIRE(bytewise.finish());
  check_parts(bytewise.parts());
}

TEST_CASE("multipart: a part larger than the memory threshold goes to a temporary file") {
  const std::string boundary = "XyZ";
  std::string big(300000, 'q');
  for (std::size_t i = 0; i < big.size(); i += 997)
    big[i] = '\r'; // near-delimiters inside the data
  std::string body = "--XyZ\r\nContent-Disposition: form-data; name=\"up\"; "
                     "filename*=UTF-8''%C3%A9t%C3%A9.bin; filename=\"ete.bin\"\r\n\r\n" +
                     big + "\r\n--XyZ--\r\n";
  app::MultipartLimits limits;
  limits.spill_threshold = 64 * 1024;
  app::MultipartParser p(boundary, limits);
  for (std::size_t off = 0; off < body.size(); off += 4093)
    REQUIRE(p.feed(body.data() + off, std::min<std::size_t>(4093, body.size() - off)));
  REQUIRE(p.finish());
  REQUIRE(p.parts().size() == 1);
  const app::MultipartPart& part = p.parts()[0];
  CHECK(part.filename == "\xC3\xA9t\xC3\xA9.bin");
  CHECK(part.data.spilled());
  CHECK(part.data.memory().empty());
  CHECK(part.data.size() == big.size());
  CHECK(part.data.contents() == big);
  char piece[5];
  CHECK(part.data.read(big.size() - 3, piece, sizeof piece) == 3);
}

TEST_CASE("multipart: malformed bodies are errors") {
  auto parse = [](const std::string& body, app::MultipartLimits limits = {}) {
    app::MultipartParser p("b", limits);
    bool fed = p.feed(body);
    return fed && p.finish();
  };
  CHECK(parse("--b\r\n\r\ndata\r\n--b--"));
  CHECK_FALSE(parse(""));
  CHECK_FALSE(parse("--b\r\n\r\nno close delimiter"));
  CHECK_FALSE(parse("--bX"));
  CHECK_FALSE(parse("--b\r\nno colon line\r\n\r\nx\r\n--b--"));
  app::MultipartLimits few;
  few.max_parts = 1;
  CHECK_FALSE(parse("--b\r\n\r\n1\r\n--b\r\n\r\n2\r\n--b--", few));
  app::MultipartLimits small;
  small.max_header_bytes = 10;
  CHECK_FALSE(parse("--b\r\nX-Long: " + std::string(100, 'h') + "\r\n\r\nx\r\n--b--", small));
  app::MultipartParser empty("");
  CHECK_FALSE(empty.finish());
}

TEST_CASE("multipart: a header of the largest size passes however the body is cut") {
  // The header "X: " + 7 bytes is 10 bytes, the limit; its blank line is cut at every place.
  const std::string body = "--b\r\nX: 1234567\r\n\r\nx\r\n--b--";
  app::MultipartLimits limits;
  limits.max_header_bytes = 10;
  for (std::size_t cut = 1; cut < body.size(); ++cut) {
    CAPTURE(cut);
    app::MultipartParser p("b", limits);
    CHECK(p.feed(body.data(), cut));
    CHECK(p.feed(body.data() + cut, body.size() - cut));
    CHECK(p.finish());
  }
  app::MultipartParser over("b", limits); // one byte more: refused, cut or not
  CHECK_FALSE(over.feed(std::string("--b\r\nX: 12345678\r\n\r\nx\r\n--b--")));
}

TEST_CASE("request: multipart parts, a malformed body is a 400") {
  app::Request r = request_with("", "multipart/form-data; boundary=\"----b0undary\"");
  r.set_body(multipart_body("----b0undary"));
  REQUIRE(r.multipart().size() == 3);
  REQUIRE(r.part("file") != nullptr);
  CHECK(r.part("file")->filename == "a;b.txt");
  CHECK(r.part("nope") == nullptr);
  app::Request bad = request_with("", "multipart/form-data; boundary=zz");
  bad.set_body("--zz\r\n\r\ncut");
  CHECK_THROWS_AS(bad.multipart(), app::HttpError);
  app::Request plain = request_with("", "text/plain");
  plain.set_body("x");
  CHECK(plain.multipart().empty());
}

TEST_CASE("request body: above the threshold spilled to a temporary file, readable") {
  app::Request r = request_with("", "application/octet-stream");
  r.set_spill_threshold(1000);
  std::string data;
  for (int i = 0; i < 5000; ++i)
    data.push_back(static_cast<char>('a' + i % 26));
  for (std::size_t off = 0; off < data.size(); off += 700)
    r.append_body(data.data() + off, std::min<std::size_t>(700, data.size() - off));
  r.finish_body();
  CHECK(r.body_spilled());
  CHECK(r.body_size() == data.size());
  char buf[100];
  REQUIRE(r.read_body(4990, buf, sizeof buf) == 10);
  CHECK(std::string(buf, 10) == data.substr(4990));
  CHECK(r.body() == data); // read into memory on demand
  r.clear();
  CHECK_FALSE(r.body_spilled());
  CHECK(r.body().empty());
  CHECK(r.spill_threshold() == 1000); // a host setting, kept across requests

  app::Request announced = request_with("");
  announced.set_spill_threshold(10);
  announced.expect_body(11);
  CHECK(announced.body_spilled()); // spilled at once, no detour through memory
  announced.append_body("0123456789A", 11);
  CHECK(announced.body() == "0123456789A");
  app::Request small = request_with("");
  small.set_body("tiny");
  CHECK_FALSE(small.body_spilled());
  CHECK(small.body() == "tiny");
}

TEST_CASE("json: read and write, bad input is a 4xx") {
  app::Request ok = request_with("", "application/json; charset=utf-8");
  ok.set_body(R"({"title":"x","n":[1,2]})");
  nlohmann::json j = app::read_json(ok);
  CHECK(j["title"] == "x");
  // The status read_json() answers a body with, 0 when it accepts it.
  auto refusal = [](std::string content_type, std::string body) {
    app::Request r = request_with("", content_type);
    r.set_body(body);
    try {
      app::read_json(r);
      return 0;
    } catch (const app::HttpError& e) {
      return e.status();
    }
  };
  CHECK(refusal("application/json", "{not json") == 400);
  CHECK(refusal("text/plain", "{}") == 415);
  CHECK(refusal("application/problem+json", "{}") == 0);
  CHECK(refusal("Application/JSON", "[]") == 0);
  app::Response res;
  app::write_json(res, {{"s", std::string("bad \xFF utf8")}}, 201);
  CHECK(res.status == 201);
  CHECK(res.header("Content-Type") == "application/json");
  CHECK(res.body == "{\"s\":\"bad \xEF\xBF\xBD utf8\"}");
}
