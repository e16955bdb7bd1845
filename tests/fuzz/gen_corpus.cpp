// Writes the seed corpus of the fuzz targets: normal requests (kept, pipelined, with a body),
// GET_VALUES, and the hostile cases of tests/integration/test_hostile_input.cpp, each as one
// file. The first byte of every input picks how the targets cut it into chunks (0: at once; see
// Chunker in fuzz_common.hpp). Usage: fuzz_gen_corpus DIR  (scripts/fuzz.sh writes
// tests/fuzz/corpus/ with it).
#include "fcgi_host/testing/fcgi_test_client.hpp"

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

// The project's own encoders (the raw test client, over fcgi_host/protocol/records.hpp).
using fcgi_test::begin_request_body;
using fcgi_test::encode_name_value;
using fcgi_test::encode_params;
using fcgi_test::encode_record;
using fcgi_test::encode_stream;
using fcgi_test::kKeepConn;
using fcgi_test::kMaxContent;
using fcgi_test::Params;
using fcgi_test::RecordType;
using fcgi_test::Role;

// What nginx's fastcgi_params sends, in short; `extra` replaces or adds.
Params standard_params(std::string_view method, std::string_view uri, std::size_t length,
                       const Params& extra = {}) {
  std::string_view path = uri.substr(0, uri.find('?'));
  std::string_view query = uri.size() > path.size() ? uri.substr(path.size() + 1) : "";
  Params p{{"QUERY_STRING", std::string(query)},
           {"REQUEST_METHOD", std::string(method)},
           {"CONTENT_TYPE", length ? "application/octet-stream" : ""},
           {"CONTENT_LENGTH", length ? std::to_string(length) : ""},
           {"SCRIPT_NAME", std::string(path)},
           {"REQUEST_URI", std::string(uri)},
           {"SERVER_PROTOCOL", "HTTP/1.1"},
           {"REMOTE_ADDR", "127.0.0.1"},
           {"HTTP_HOST", "localhost"}};
  for (const auto& e : extra) {
    bool replaced = false;
    for (auto& q : p)
      if (q.first == e.first) q.second = e.second, replaced = true;
    if (!replaced) p.push_back(e);
  }
  return p;
}

} // namespace

namespace {

std::string begin(std::uint16_t id, std::uint8_t flags = 0, Role role = Role::Responder,
                  std::uint8_t padding = 0) {
  return encode_record(RecordType::BeginRequest, id, begin_request_body(role, flags), padding);
}

std::string request(std::uint16_t id, const Params& params, std::string_view body,
                    std::uint8_t flags = 0, std::size_t chunk = kMaxContent) {
  return begin(id, flags) + encode_stream(RecordType::Params, id, encode_params(params), chunk) +
         encode_stream(RecordType::Stdin, id, body, chunk);
}

Params get(const std::string& uri) {
  return standard_params("GET", uri, 0);
}

Params post(const std::string& uri, std::size_t length) {
  return standard_params("POST", uri, length);
}

std::string dir;
int written = 0;

void put(const std::string& name, const std::string& input,
         const std::string& chunking = std::string(1, '\0')) {
  std::ofstream out(dir + "/" + name, std::ios::binary);
  out << chunking << input;
  if (!out) {
    std::perror(name.c_str());
    std::exit(1);
  }
  ++written;
}

} // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  dir = argv[1];
  const std::string body(3000, 'b');
  const std::string small_chunks("\x03\x00\x02\x05", 4); // 3 sizes: 1, 15, 36 bytes

  // Normal traffic.
  put("get", request(1, get("/hello?x=1"), ""));
  put("get_chunked", request(1, get("/hello?x=1"), ""), small_chunks);
  put("post_body", request(1, post("/echo", body.size()), body));
  put("post_body_chunked", request(1, post("/echo", body.size()), body), small_chunks);
  put("post_body_split_records", request(1, post("/echo", body.size()), body, 0, 100));
  put("keepalive_two", request(1, get("/a"), "", kKeepConn) + request(1, get("/b"), "", kKeepConn));
  put("pipelined_three", request(1, get("/p1"), "", kKeepConn) +
                             request(2, post("/p2", 5), "hello", kKeepConn) +
                             request(3, get("/p3"), ""));
  put("no_content_length_body", request(1, get("/nolen"), "some body"));

  // Management records.
  Params all_values{{"FCGI_MAX_CONNS", ""}, {"FCGI_MAX_REQS", ""}, {"FCGI_MPXS_CONNS", ""}};
  put("get_values", encode_record(RecordType::GetValues, 0, encode_params(all_values), 5));
  Params repeated;
  for (int i = 0; i < 5; ++i)
    repeated.insert(repeated.end(), all_values.begin(), all_values.end());
  put("get_values_repeated", encode_record(RecordType::GetValues, 0, encode_params(repeated)));
  put("get_values_zero_padding",
      encode_record(RecordType::GetValues, 0, encode_name_value("FCGI_MAX_CONNS", ""), 0));
  put("get_values_malformed", encode_record(RecordType::GetValues, 0, "\x0e\x80\x00"));
  put("unknown_management", encode_record(0x42, 0, "12345678", 3) + encode_record(0xff, 0, ""));
  std::string flood;
  for (int i = 0; i < 40; ++i)
    flood += encode_record(0x42, 0, "");
  put("management_flood", flood);
  put("management_between_records",
      begin(1) + encode_record(RecordType::GetValues, 0, encode_params(all_values)) +
          encode_stream(RecordType::Params, 1, encode_params(get("/between"))) +
          encode_record(0x33, 0, "x") + encode_stream(RecordType::Stdin, 1, ""));

  // Hostile.
  put("wrong_version", encode_record(1, 1, begin_request_body(), 0, 2));
  put("http", "GET / HTTP/1.1\r\nHost: localhost\r\n\r\n");
  put("garbage", "\xde\xad\xbe\xef\x01\x02\x03\x04\x05\x06\x07\x08\x09");
  put("truncated", request(1, get("/t"), "").substr(0, 29));
  put("begin_16_bytes",
      encode_record(RecordType::BeginRequest, 1, begin_request_body() + std::string(8, '\0')));
  std::string lying; // a PARAMS header that says 1000 bytes; only the pairs follow
  fcgi_host::records::append_header(lying, RecordType::Params, 1, 1000);
  put("lying_length", begin(1) + lying + encode_params(get("/lie")));
  put("params_before_begin", encode_stream(RecordType::Params, 1, encode_params(get("/x"))));
  put("stdin_before_begin", encode_stream(RecordType::Stdin, 1, "body"));
  const std::string huge = "\xff\xff\xff\xfe";
  put("huge_name_length", begin(1) + encode_stream(RecordType::Params, 1, huge + "\x01X") +
                              encode_record(RecordType::Stdin, 1, ""));
  put("huge_value_length", begin(1) + encode_stream(RecordType::Params, 1, "\x01" + huge + "X") +
                               encode_record(RecordType::Stdin, 1, ""));
  Params nul_name = get("/nul"), nul_value = get("/nul");
  nul_name.emplace_back(std::string("HTTP_X\0Y", 8), "v");
  nul_value.emplace_back("HTTP_X", std::string("a\0b", 3));
  put("nul_in_name", request(1, nul_name, ""));
  put("nul_in_value", request(1, nul_value, ""));
  Params dup = get("/first");
  dup.emplace_back("REQUEST_URI", "/second");
  dup.emplace_back("HTTP_X_DUP", "1");
  dup.emplace_back("HTTP_X_DUP", "2");
  put("duplicate_names", request(1, dup, ""));
  put("content_length_short",
      request(1, standard_params("POST", "/cl", 5, {{"CONTENT_LENGTH", "10"}}), "12345"));
  put("content_length_long",
      request(1, standard_params("POST", "/cl", 10, {{"CONTENT_LENGTH", "5"}}), "1234567890"));
  put("content_length_not_a_number",
      request(1, standard_params("POST", "/cl", 2, {{"CONTENT_LENGTH", "12x"}}), "12"));
  put("content_length_over_max_body", request(1, post("/big", 1 << 20), ""));
  put("body_over_max_body", request(1, get("/big"), std::string(5000, 'b')));
  put("params_over_max_size",
      begin(1) +
          encode_stream(RecordType::Params, 1,
                        encode_name_value("HTTP_BIG", std::string(1500, 'v'))) +
          encode_record(RecordType::Stdin, 1, ""));
  Params many = get("/many");
  for (int i = 0; i < 20; ++i)
    many.emplace_back("HTTP_X_" + std::to_string(i), "v");
  put("too_many_params", request(1, many, ""));
  put("too_many_records", begin(1) +
                              encode_stream(RecordType::Params, 1, encode_params(get("/r"))) +
                              encode_stream(RecordType::Stdin, 1, std::string(80, 'r'), 1));
  std::string one_params = encode_record(RecordType::Params, 1, encode_params(get("/one")));
  std::string one_end =
      encode_record(RecordType::Params, 1, "") + encode_record(RecordType::Stdin, 1, "");
  put("second_begin", begin(1) + one_params + begin(2) + one_end);
  put("second_request_interleaved", begin(1) + one_params + request(2, get("/two"), "") + one_end);
  put("same_begin_twice", begin(1) + begin(1));
  put("role_authorizer", begin(1, kKeepConn, Role::Authorizer) +
                             encode_stream(RecordType::Params, 1, encode_params(get("/role"))) +
                             encode_record(RecordType::Stdin, 1, ""));
  put("role_filter", begin(1, 0, Role::Filter) + encode_record(RecordType::Stdin, 1, ""));
  put("abort_before_stdin_end",
      begin(1, kKeepConn) + encode_stream(RecordType::Params, 1, encode_params(post("/a", 100))) +
          encode_record(RecordType::Stdin, 1, "partial") +
          encode_record(RecordType::AbortRequest, 1, "") +
          encode_record(RecordType::Stdin, 1, "late") + encode_record(RecordType::Stdin, 1, "") +
          request(1, get("/next"), ""));
  put("abort_after_complete", request(1, get("/done"), "", kKeepConn) +
                                  encode_record(RecordType::AbortRequest, 1, "") +
                                  request(2, get("/next"), ""));

  // Legal but unusual framing.
  put("padding_255", begin(1, 0, Role::Responder, 255) +
                         encode_record(RecordType::Params, 1, encode_params(post("/pad", 5)), 255) +
                         encode_record(RecordType::Params, 1, "", 255) +
                         encode_record(RecordType::Stdin, 1, "hello", 255) +
                         encode_record(RecordType::Stdin, 1, "", 255));
  put("pairs_split_1_byte",
      begin(1) + encode_stream(RecordType::Params, 1, encode_params(get("/split")), 1) +
          encode_record(RecordType::Stdin, 1, ""));
  Params long_value = get("/long");
  long_value.emplace_back("HTTP_X_LONG", std::string(300, 'L'));
  put("pairs_split_3_bytes",
      begin(1) + encode_stream(RecordType::Params, 1, encode_params(long_value), 3) +
          encode_record(RecordType::Stdin, 1, ""));
  put("record_65535", begin(1) + encode_stream(RecordType::Params, 1, encode_params(get("/b"))) +
                          encode_stream(RecordType::Stdin, 1, std::string(65535, 's')));

  // fuzz_app_parsers: the first byte picks the parser (0 args, 1 cookies, 2 multipart, 3 router);
  // for multipart 8 bytes of chunk sizes come next. (The FastCGI targets take them as garbage.)
  put("app_query", "name=Ann%20B+C&x=1&x=2&flag&&=v&k%5B%5D=%zz%4", std::string(1, '\0'));
  put("app_cookies", "a=1;b=2; sid=\"x y\";  flag; c=; =nameless; a=dup", std::string(1, '\1'));
  put("app_multipart",
      "preamble\r\n--b0\r\nContent-Disposition: form-data; name=\"t\"\r\n\r\nHello\r\n"
      "--b0\r\nContent-Disposition: form-data; filename*=UTF-8''%C3%A9.txt; name=\"f\"\r\n"
      "Content-Type: text/plain\r\n\r\n" +
          std::string(100, 'd') + "\r\n--b\r\n--b0--\r\nepilogue",
      std::string("\2\1\7\3\x20\x11\5\2\x40", 9));
  // A part header of exactly the harness's 512-byte limit, fed in 3-byte pieces so that its
  // blank line is cut: once refused when cut, accepted whole.
  put("app_multipart_header_at_limit",
      "--b0\r\nX: " + std::string(509, 'h') + "\r\n\r\ndata\r\n--b0--",
      std::string("\2\2\2\2\2\2\2\2\2", 9));
  put("app_router", "/a/-12/b/my-slug", std::string(1, '\3'));
  put("app_router_tail", "/f/a%2Fb/c%20d", std::string(1, '\3'));
  std::fprintf(stderr, "wrote %d inputs to %s\n", written, dir.c_str());
  return 0;
}
