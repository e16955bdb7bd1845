// Response::send_file() in each FileOffload mode, and the media types by extension.
#include "app/content_types.hpp"
#include "app/response.hpp"
#include "app/testing.hpp"
#include "support/files.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <unistd.h>

namespace {

std::string bytes(std::size_t n) {
  std::string s(n, '\0');
  for (std::size_t i = 0; i < n; ++i)
    s[i] = static_cast<char>(i * 31 % 251);
  return s;
}

} // namespace

TEST_CASE("content_type_for: by the extension, case-insensitively, octet-stream otherwise") {
  CHECK(app::content_type_for("/srv/a/index.html") == "text/html; charset=utf-8");
  CHECK(app::content_type_for("/srv/A.PNG") == "image/png");
  CHECK(app::content_type_for("/srv/data.tar.gz") == "application/gzip");
  CHECK(app::content_type_for("/srv/README") == "application/octet-stream");
  CHECK(app::content_type_for("/srv/.profile") == "application/octet-stream");
  CHECK(app::content_type_for("/srv.d/file") == "application/octet-stream");
}

TEST_CASE("send_file streams by default: small files buffered, large ones in chunks") {
  test_support::TempDir f("fcgi-send-file");
  app::Response small;
  CHECK(small.send_file(f.write("a.txt", "hello\n")));
  CHECK(small.status == 200);
  CHECK(small.body == "hello\n");
  CHECK(small.header("Content-Type") == "text/plain; charset=utf-8");
  CHECK_FALSE(small.head_sent());

  const std::string large = bytes(300 * 1024 + 7);
  app::testing::CaptureSink sink;
  app::Response streamed;
  streamed.reset(&sink);
  CHECK(streamed.send_file(f.write("b.bin", large)));
  CHECK(streamed.head_sent());
  CHECK(sink.status == 200);
  CHECK(sink.body == large);
  CHECK(streamed.header("Content-Length") == std::to_string(large.size()));
  CHECK(streamed.header("Content-Type") == "application/octet-stream");
}

TEST_CASE("send_file for HEAD sends the head with the length and no bytes") {
  test_support::TempDir f("fcgi-send-file");
  app::testing::CaptureSink sink;
  app::Response res;
  res.reset(&sink);
  res.set_head_only(true);
  CHECK(res.send_file(f.write("b.bin", bytes(200 * 1024))));
  CHECK(sink.heads_sent == 1);
  CHECK(sink.body.empty());
  CHECK(res.header("Content-Length") == "204800");
}

TEST_CASE("send_file with X-Accel-Redirect or X-Sendfile: the header and no body") {
  test_support::TempDir f("fcgi-send-file");
  const std::string path = f.write("my file.css", "body{}");
  app::FileOffload nginx{app::FileOffload::Mode::XAccelRedirect, "/internal/"};
  app::Response accel;
  accel.set_file_offload(&nginx);
  CHECK(accel.send_file(path));
  CHECK(accel.status == 200);
  CHECK(accel.body.empty());
  CHECK(accel.header("Content-Type") == "text/css; charset=utf-8");
  // Each segment percent-encoded (nginx decodes the URI), the prefix's slash not doubled.
  CHECK(accel.header("X-Accel-Redirect") == "/internal" + f.path() + "/my%20file.css");

  app::FileOffload lighttpd{app::FileOffload::Mode::XSendfile, ""};
  app::Response sendfile;
  sendfile.set_file_offload(&lighttpd);
  sendfile.reset(nullptr); // the offload survives the host's reset between requests
  CHECK(sendfile.send_file(path));
  CHECK(sendfile.header("X-Sendfile") == path);
  CHECK(sendfile.body.empty());
}

TEST_CASE("send_file answers 404 for a missing file or a directory, in every mode") {
  test_support::TempDir f("fcgi-send-file");
  const app::FileOffload nginx{app::FileOffload::Mode::XAccelRedirect, "/internal"};
  for (const app::FileOffload* mode : {static_cast<const app::FileOffload*>(nullptr), &nginx}) {
    for (const std::string& path : {f.file("missing"), f.path()}) {
      app::Response res;
      res.set_file_offload(mode);
      CHECK(res.send_file(path));
      CHECK(res.status == 404);
      CHECK(res.header("X-Accel-Redirect").empty());
    }
  }
}

TEST_CASE("send_file refuses paths whose meaning could change on the way (a handler bug: 500)") {
  app::Response res;
  for (const char* path :
       {"relative.txt", "/srv/../etc/passwd", "/srv/./a", "/srv/a/..", "/srv/a\r\nX-Evil: 1"})
    CHECK_THROWS_AS(res.send_file(path), std::invalid_argument);
  CHECK_THROWS_AS(res.send_file(std::string_view("/srv/a\0b", 8)), std::invalid_argument);
  // A name that merely holds dots is a name.
  test_support::TempDir f("fcgi-send-file");
  CHECK(res.send_file(f.write("..hidden..", "x")));
  CHECK(res.status == 200);
}
