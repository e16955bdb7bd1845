// Self-tests of the raw FastCGI client: encoders against the spec's byte layout, and the client
// against a scripted peer on the other end of a socketpair (no fcgi-host needed).
#include "checks.hpp"
#include "fcgi_host/testing/fcgi_test_client.hpp"

#include <sys/socket.h>
#include <thread>

using namespace fcgi_test;

namespace {

struct Pair {
  Client client;
  Client peer; // plays the application side with raw records
};

Pair make_pair() {
  int fds[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) == 0);
  return {Client(fds[0]), Client(fds[1])};
}

// Reads one whole request on the peer side: BEGIN_REQUEST, PARAMS and STDIN streams.
struct SeenRequest {
  std::uint16_t id = 0;
  std::string begin_body;
  Params params;
  std::string stdin_data;
};

SeenRequest read_request(Client& peer) {
  SeenRequest seen;
  std::string params;
  bool params_done = false, stdin_done = false;
  while (!params_done || !stdin_done) {
    RecordResult rr = peer.read_record(Millis{2000});
    REQUIRE(rr.status == IoStatus::Ok);
    const Record& r = rr.record;
    seen.id = r.request_id;
    if (r.type == RecordType::BeginRequest) seen.begin_body = r.content;
    if (r.type == RecordType::Params) {
      params += r.content;
      params_done = r.content.empty(); // the empty record ends the stream
    }
    if (r.type == RecordType::Stdin) {
      seen.stdin_data += r.content;
      stdin_done = r.content.empty();
    }
  }
  seen.params = decode_params(params);
  return seen;
}

std::string end_request(std::uint16_t id, std::uint32_t app_status, std::uint8_t protocol_status) {
  std::string out;
  fcgi_host::records::append_end_request(out, id, app_status, protocol_status);
  return out;
}

std::string param(const Params& p, const std::string& name) {
  for (const auto& [n, v] : p)
    if (n == name) return v;
  return "(absent)";
}

} // namespace

TEST_SUITE("fcgi_test client") {

  TEST_CASE("a record header follows the spec's byte layout") {
    std::string r = encode_record(RecordType::Stdout, 0x1234, "abc", 5);
    REQUIRE(r.size() == 8 + 3 + 5);
    CHECK(r[0] == 1); // version
    CHECK(r[1] == 6); // FCGI_STDOUT
    CHECK(static_cast<unsigned char>(r[2]) == 0x12);
    CHECK(static_cast<unsigned char>(r[3]) == 0x34);
    CHECK(r[4] == 0); // contentLength, big-endian
    CHECK(r[5] == 3);
    CHECK(r[6] == 5); // paddingLength
    CHECK(r.substr(8, 3) == "abc");
    CHECK_THROWS_AS(encode_record(RecordType::Stdin, 1, std::string(65536, 'x')), Error);
  }

  TEST_CASE("BEGIN_REQUEST body carries role and FCGI_KEEP_CONN") {
    std::string b = begin_request_body(Role::Responder, kKeepConn);
    CHECK(b == std::string("\0\1\1\0\0\0\0\0", 8));
  }

  TEST_CASE("name-value lengths take 1 byte below 128 and 4 bytes from 128") {
    CHECK(encode_name_value("AB", std::string(127, 'v')).substr(0, 2) == std::string("\2\x7f", 2));
    std::string long_value(300, 'v');
    std::string nv = encode_name_value("AB", long_value);
    CHECK(nv.substr(0, 5) == std::string("\2\x80\0\x01\x2c", 5)); // 300 = 0x12c, high bit set
    Params p{{"A", ""}, {"B", std::string(128, 'x')}, {std::string(200, 'n'), "v"}};
    CHECK(decode_params(encode_params(p)) == p);
    CHECK_THROWS_AS(decode_params(nv.substr(0, nv.size() - 1)), Error);
  }

  TEST_CASE("a stream is cut into records and ended by an empty one") {
    std::string s = encode_stream(RecordType::Stdin, 7, std::string(150000, 'x'));
    // 65535 + 65535 + 18930 bytes, then the empty record.
    CHECK(s.size() == 4 * 8 + 150000);
    CHECK(s.substr(s.size() - 8) == encode_record(RecordType::Stdin, 7, ""));
    CHECK(encode_stream(RecordType::Params, 1, "") == encode_record(RecordType::Params, 1, ""));
  }

  TEST_CASE("CGI output is split into status, headers and body") {
    Response r;
    parse_cgi_output(
        "Status: 404 Not Found\r\nContent-Type: text/plain\r\nX-A: 1\r\nx-a: 2\r\n\r\nno\r\n\r\n",
        r);
    CHECK(r.status == 404);
    CHECK(r.header("content-type") == "text/plain");
    CHECK(r.header_values("X-A") == std::vector<std::string>{"1", "2"});
    CHECK(r.body == "no\r\n\r\n");
    parse_cgi_output("Content-Type: text/html\n\nhi", r);
    CHECK(r.status == 200);
    CHECK(r.body == "hi");
    parse_cgi_output("no header block", r);
    CHECK(r.status == 0);
  }

  TEST_CASE("standard params look like nginx's fastcgi_params, extras override") {
    Params p = standard_params("POST", "/a/b?x=1&y=2", 5,
                               {{"CONTENT_TYPE", "text/plain"}, {"HTTP_X", "1"}});
    CHECK(param(p, "REQUEST_METHOD") == "POST");
    CHECK(param(p, "REQUEST_URI") == "/a/b?x=1&y=2");
    CHECK(param(p, "SCRIPT_NAME") == "/a/b");
    CHECK(param(p, "DOCUMENT_URI") == "/a/b");
    CHECK(param(p, "QUERY_STRING") == "x=1&y=2");
    CHECK(param(p, "CONTENT_LENGTH") == "5");
    CHECK(param(p, "CONTENT_TYPE") == "text/plain");
    CHECK(param(p, "SERVER_PROTOCOL") == "HTTP/1.1");
    CHECK(param(p, "REMOTE_ADDR") == "127.0.0.1");
    CHECK(param(p, "HTTP_X") == "1");
  }

  TEST_CASE("request and response round trip against a scripted peer") {
    auto [client, peer] = make_pair();
    std::thread app([&peer = peer] {
      SeenRequest seen = read_request(peer);
      std::string out = "Status: 201 Created\r\nX-Id: " + std::to_string(seen.id) + "\r\n\r\n" +
                        param(seen.params, "REQUEST_METHOD") + " " + seen.stdin_data;
      peer.send_raw(encode_record(RecordType::Stdout, seen.id, out.substr(0, 10), 3) +
                    encode_record(RecordType::Stderr, seen.id, "careful") +
                    encode_record(RecordType::Stdout, seen.id, out.substr(10)) +
                    encode_record(RecordType::Stdout, seen.id, "") + end_request(seen.id, 7, 0));
    });
    Response r = client.request("PUT", "/x", "body!");
    app.join();
    CHECK(r.ended);
    CHECK(r.status == 201);
    CHECK(r.header("x-id") == "1");
    CHECK(r.body == "PUT body!");
    CHECK(r.stderr_text == "careful");
    CHECK(r.app_status == 7);
    CHECK(r.protocol_status == kRequestComplete);
  }

  TEST_CASE("pipelined responses may come back in any order") {
    auto [client, peer] = make_pair();
    Request a, b;
    a.uri = "/a";
    b.uri = "/b";
    std::uint16_t ia = client.send_request(a), ib = client.send_request(b);
    CHECK(ia != ib);
    SeenRequest first = read_request(peer), second = read_request(peer);
    CHECK(first.begin_body[2] == kKeepConn);
    peer.send_raw(encode_record(RecordType::Stdout, second.id, "\r\n\r\nsecond") +
                  end_request(second.id, 0, 0) +
                  encode_record(RecordType::Stdout, first.id, "\r\n\r\nfirst") +
                  end_request(first.id, 0, 0));
    CHECK(client.read_response(ia).body == "first");
    CHECK(client.read_response(ib).body == "second");
  }

  TEST_CASE("closed by peer and timed out are told apart") {
    auto [client, peer] = make_pair();
    client.set_timeout(Millis{200});
    std::uint16_t id = client.send_request(Request{});
    CHECK(client.read_record(Millis{50}).status == IoStatus::TimedOut);
    CHECK_THROWS_AS(client.read_response(id), TimeoutError);
    peer.send_raw(encode_record(RecordType::Stdout, id, "\r\n\r\npartial"));
    peer.close();
    Response r = client.read_response(id);
    CHECK_FALSE(r.ended);
    CHECK(r.body == "partial");
    CHECK(client.read_record(Millis{50}).status == IoStatus::Closed);
    CHECK(client.read_until_closed(Millis{50}).status == IoStatus::Closed);
  }

  TEST_CASE("connect errors name the address") {
    CHECK_THROWS_WITH_AS(connect_socket("unix:/nonexistent/fcgi.sock"),
                         doctest::Contains("/nonexistent/fcgi.sock"), Error);
    CHECK_THROWS_AS(connect_socket("no-port-here"), Error);
    int port = it::free_tcp_port();
    CHECK_THROWS_WITH_AS(connect_socket(":" + std::to_string(port)), doctest::Contains("refused"),
                         Error);
  }

} // TEST_SUITE
