// Front-server-aware responses through a real nginx: Response::send_file() in stream mode and in
// X-Accel-Redirect mode (nginx sends the file from an internal location), in X-Sendfile mode
// through lighttpd (its shipped snippet enables it), and the response head guard (a head larger
// than --max-response-head is the host's logged 500, not nginx's 502).
#include "checks.hpp"
#include "front_servers.hpp"
#include "support/skip.hpp"

#include <string>

using fcgi_test::Millis;
using it::HostProcess;
using it::NginxProcess;

namespace {

// The internal location of conf/nginx-fcgi-host.conf: an X-Accel-Redirect to /internal/PATH
// serves the file at /PATH, and no client can ask for it directly.
const std::string kInternal = "    location /internal/ {\n      internal;\n      alias /;\n    }\n";

std::string file_target(const std::string& path) {
  return "/file?path=" + path;
}

} // namespace

TEST_SUITE("front-server-aware responses") {

  TEST_CASE("send_file through nginx: streamed by the host, or sent by nginx on X-Accel-Redirect") {
    for (const std::string mode : {"stream", "x-accel-redirect"}) {
      INFO("--send-file-mode " << mode);
      // --user root: the files are in a private temp dir of root's (nginx runs as root too).
      HostProcess host({"--app", FCGI_TEST_HANDLER_API_PLUGIN, "--workers", "1", "--user", "root",
                        "--send-file-mode", mode});
      it::TempDir files;
      const std::string large = it::pattern_body(300 * 1024);
      const std::string big = files.write("big.bin", large);
      const std::string page = files.write("page.html", "<p>hi</p>\n");
      NginxProcess nginx({.fastcgi_address = host.address(), .server_extra = kInternal});

      it::HttpResponse r = it::http_request(nginx.port(), "GET", file_target(big));
      CHECK(r.status == 200);
      CHECK(r.body.size() == large.size());
      bool same = r.body == large;
      CHECK(same);
      CHECK(r.header("Content-Length") == std::to_string(large.size()));
      CHECK_FALSE(r.header("X-Accel-Redirect")); // nginx consumes it
      // What the host itself answers, without nginx: the header and no body, or the bytes.
      fcgi_test::Response direct = host.connect().request("GET", file_target(page));
      CHECK(direct.header("X-Accel-Redirect") ==
            (mode == "stream" ? std::nullopt : std::optional<std::string>("/internal" + page)));
      CHECK(direct.body == (mode == "stream" ? "<p>hi</p>\n" : ""));

      it::HttpResponse html = it::http_request(nginx.port(), "GET", file_target(page));
      CHECK(html.status == 200);
      CHECK(html.body == "<p>hi</p>\n");
      CHECK(html.header("Content-Type").value_or("").starts_with("text/html"));

      CHECK(it::http_request(nginx.port(), "GET", file_target(files.file("missing"))).status ==
            404);
      // The internal location answers nobody directly.
      CHECK(it::http_request(nginx.port(), "GET", "/internal" + page).status == 404);
      INFO("nginx error log:\n" << nginx.error_log());
      CHECK(it::lines_with(nginx.error_log(), "[crit]").empty());
    }
  }

  TEST_CASE("send_file through lighttpd in x-sendfile mode: lighttpd sends the file") {
    if (!it::front_installed(it::Front::Lighttpd)) {
      return test_support::skip("lighttpd is not installed (scripts/test.sh installs it)");
    }
    it::HostOptions o;
    o.args = {"--app", FCGI_TEST_HANDLER_API_PLUGIN, "--workers", "1", "--user",
              "root",  "--send-file-mode",           "x-sendfile"};
    for (const std::string& a : it::reachable_socket_args())
      o.args.push_back(a);
    HostProcess host(o);
    it::open_socket_dir(host);
    it::TempDir files;
    const std::string large = it::pattern_body(200 * 1024);
    const std::string big = files.write("big.bin", large);
    it::FrontServer lighttpd({it::Front::Lighttpd, host.address(), {}});
    INFO("lighttpd's log:\n" << lighttpd.log());
    fcgi_test::Response direct = host.connect().request("GET", file_target(big));
    CHECK(direct.header("X-Sendfile") == big);
    CHECK(direct.body.empty());
    it::HttpResponse r = it::http_request(lighttpd.port(), "GET", file_target(big));
    CHECK(r.status == 200);
    bool same = r.body == large;
    CHECK(same);
    CHECK_FALSE(r.header("X-Sendfile"));
    CHECK(it::http_request(lighttpd.port(), "GET", file_target(files.file("missing"))).status ==
          404);
  }

  TEST_CASE("response head guard through nginx: the host's 500 and a log line, not nginx's 502") {
    HostProcess host({"--app", FCGI_TEST_HANDLER_API_PLUGIN, "--workers", "1"});
    NginxProcess nginx({host.address()});
    // At the limit, nginx (fastcgi_buffer_size 4k) takes it: "Status: 200 OK", X-Pad,
    // Content-Type, Content-Length and the empty line are 72 bytes besides the padding, and the
    // buffer holds the record's 8-byte header too. One byte more would fill nginx's buffer and
    // lose the body (nginx 1.22), two would be its 502.
    it::HttpResponse fits = it::http_request(nginx.port(), "GET", "/big-head?bytes=4015");
    CHECK(fits.status == 200);
    CHECK(fits.body == "OK");
    for (const std::string target :
         {"/big-head?bytes=4016", "/big-head?bytes=5000", "/big-head?bytes=5000&stream=1"}) {
      INFO(target);
      it::HttpResponse over = it::http_request(nginx.port(), "GET", target);
      CHECK(over.status == 500);
      CHECK(over.body == "Internal Server Error\n");
    }
    CHECK(host.wait_log(
        "response head of [0-9]+ bytes to GET /big-head.bytes=(4016|5000)(&stream=1)? is larger "
        "than --max-response-head \\(4096\\): answered 500",
        Millis{5000}, 3));
    INFO("nginx error log:\n" << nginx.error_log());
    CHECK(it::lines_with(nginx.error_log(), "too big header").empty());
  }

} // TEST_SUITE
