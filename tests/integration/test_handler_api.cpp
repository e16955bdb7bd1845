// The handler API through a real nginx, with curl as the client: path parameters, decoded args,
// HEAD, uploads with curl -F (a part and a body above the spill threshold), cookies and
// redirects; and the notes example application behind nginx.
#include "checks.hpp"

#include <csignal>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

using fcgi_test::Millis;
using it::HostProcess;
using it::NginxProcess;

namespace {

struct CurlResult {
  int exit_code = -1;
  std::string out;
};

// Runs curl (bounded by its own --max-time and by a wait here), stdout and stderr captured.
CurlResult curl(const it::TempDir& dir, std::vector<std::string> args) {
  std::vector<std::string> argv = {"/usr/bin/curl", "--silent", "--show-error", "--max-time", "20"};
  argv.insert(argv.end(), args.begin(), args.end());
  std::vector<char*> cargv;
  for (auto& a : argv)
    cargv.push_back(a.data());
  cargv.push_back(nullptr);
  std::string out_path = dir.file("curl.out");
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int in = ::open("/dev/null", O_RDONLY);
    if (out < 0 || in < 0) ::_exit(126);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(out, 2);
    ::execv(cargv[0], cargv.data());
    ::_exit(127);
  }
  CurlResult result;
  int status = 0;
  bool done = it::wait_for([&] { return ::waitpid(pid, &status, WNOHANG) == pid; }, Millis{30000});
  if (!done) {
    ::kill(pid, SIGKILL);
    ::waitpid(pid, &status, 0);
  }
  result.exit_code = done && WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  result.out = it::read_file(out_path);
  return result;
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

} // namespace

TEST_SUITE("handler API through nginx") {

  TEST_CASE("path parameters, decoded query args, custom 404, HttpError status") {
    HostProcess host({"--app", FCGI_TEST_HANDLER_API_PLUGIN, "--workers", "1"});
    NginxProcess nginx({host.address()});
    it::TempDir dir;
    std::string base = "http://127.0.0.1:" + std::to_string(nginx.port());

    CurlResult user = curl(dir, {base + "/users/42"});
    CHECK(user.out == "user 42\n");
    CurlResult files = curl(dir, {base + "/users/ann%20b/files/docs/a%2Bb.txt"});
    CHECK(files.out == "ann b wants docs/a+b.txt (route GET /users/{name}/files/{path*})\n");
    CurlResult args = curl(dir, {base + "/args?name=Ann%20B+C&x=1&x=2"});
    CHECK(args.out == "name=Ann B C\nx=1\nx=2\n");
    CurlResult missing = curl(dir, {"-w", "%{http_code}", base + "/users/abc"});
    CHECK(missing.out == "nothing at /users/abc\n404");
    CurlResult teapot = curl(dir, {"-i", base + "/teapot"});
    CHECK(contains(teapot.out, "HTTP/1.1 418 I'm a teapot"));
    CHECK(contains(teapot.out, "short and stout"));
    CurlResult form = curl(dir, {"--data", "a=x+y%21", base + "/form"});
    CHECK(form.out == "a=x y!\n");
    it::check_no_alerts(host);
  }

  TEST_CASE("HEAD is answered by GET routes, buffered and streamed") {
    HostProcess host({"--app", FCGI_TEST_HANDLER_API_PLUGIN, "--workers", "1"});
    NginxProcess nginx({host.address()});
    it::TempDir dir;
    std::string base = "http://127.0.0.1:" + std::to_string(nginx.port());

    CurlResult head = curl(dir, {"--head", base + "/users/7"});
    CHECK(head.exit_code == 0);
    CHECK(contains(head.out, "HTTP/1.1 200 OK"));
    CHECK(contains(head.out, "Content-Length: 7")); // "user 7\n", as the GET sends
    CurlResult get = curl(dir, {"-i", base + "/users/7"});
    CHECK(contains(get.out, "Content-Length: 7"));

    CurlResult streamed = curl(dir, {"--head", base + "/stream"});
    CHECK(streamed.exit_code == 0);
    CHECK(contains(streamed.out, "HTTP/1.1 200 OK"));
    CHECK(contains(streamed.out, "X-Streamed: yes"));
    CHECK_FALSE(contains(streamed.out, "line 0"));
    CurlResult full = curl(dir, {base + "/stream"});
    CHECK(contains(full.out, "line 0\n"));
    CHECK(contains(full.out, "line 99\n"));
    CurlResult post = curl(dir, {"--head", "-X", "POST", base + "/users/7"});
    CHECK(contains(post.out, "405"));
    CHECK(contains(post.out, "Allow: GET, HEAD"));
  }

  TEST_CASE("uploads with curl -F: fields and files, a part above the spill threshold") {
    HostProcess host({"--app", FCGI_TEST_HANDLER_API_PLUGIN, "--workers", "1"});
    NginxProcess nginx({host.address()});
    it::TempDir dir;
    std::string base = "http://127.0.0.1:" + std::to_string(nginx.port());
    dir.write("small.txt", "small file\r\n--not a boundary\r\n");
    dir.write("big.bin", it::pattern_body(1536 * 1024)); // above the default 1 MiB

    CurlResult up =
        curl(dir, {"-F", "title=my upload", "-F", "small=@" + dir.file("small.txt"), "-F",
                   "big=@" + dir.file("big.bin") + ";type=application/x-test", base + "/upload"});
    INFO(up.out);
    CHECK(up.exit_code == 0);
    CHECK(contains(up.out, "part title filename= type= size=9 in-memory value=my upload\n"));
    CHECK(contains(up.out, "part small filename=small.txt type=text/plain size=30 in-memory\n"));
    CHECK(contains(up.out,
                   "part big filename=big.bin type=application/x-test size=1572864 spilled\n"));
    // The whole body (above the threshold too) went to a temporary file as well.
    std::size_t body_line = up.out.find("\nbody ");
    REQUIRE(body_line != std::string::npos);
    CHECK(up.out.substr(up.out.size() - 9) == " spilled\n");
    it::check_no_alerts(host);
  }

  TEST_CASE("cookies and redirects") {
    HostProcess host({"--app", FCGI_TEST_HANDLER_API_PLUGIN, "--workers", "1"});
    NginxProcess nginx({host.address()});
    it::TempDir dir;
    std::string base = "http://127.0.0.1:" + std::to_string(nginx.port());

    CurlResult login = curl(dir, {"-i", base + "/login?sid=abc123"});
    CHECK(contains(login.out, "HTTP/1.1 303 See Other"));
    CHECK(contains(login.out, "Location: /whoami"));
    CHECK(contains(login.out, "Set-Cookie: sid=abc123; Path=/; HttpOnly; SameSite=Lax"));
    CHECK(contains(login.out, "Set-Cookie: theme=dark; Max-Age=3600"));

    // Follow the redirect with a cookie jar: the cookies come back.
    std::string jar = dir.file("jar");
    CurlResult followed = curl(dir, {"-L", "-c", jar, "-b", jar, base + "/login?sid=abc123"});
    CHECK(followed.out == "sid=abc123 theme=dark\n");
    CurlResult sent = curl(dir, {"-b", "theme=light; broken; sid=\"q\"", base + "/whoami"});
    CHECK(sent.out == "sid=q theme=light\n");

    CurlResult moved =
        curl(dir, {"-w", "%{http_code} %{redirect_url}", "-o", "/dev/null", base + "/moved"});
    CHECK(moved.out == "301 " + base + "/users/1");
  }

  TEST_CASE("the notes example behind nginx") {
    it::TempDir data;
    // The workers create the database here: started as root, they run as nobody.
    if (geteuid() == 0) REQUIRE(::chmod(data.path().c_str(), 0777) == 0);
    HostProcess host({"--app", FCGI_TEST_NOTES_PLUGIN, "--workers", "2", "--env",
                      "NOTES_DB=" + data.file("notes.db")});
    NginxProcess nginx({host.address()});
    it::TempDir dir;
    std::string base = "http://127.0.0.1:" + std::to_string(nginx.port());

    CurlResult created =
        curl(dir, {"-H", "Content-Type: application/json", "--data", R"({"title":"via nginx"})",
                   "-w", " %{http_code}", base + "/notes"});
    CHECK(contains(created.out, R"("title":"via nginx")"));
    CHECK(contains(created.out, " 201"));
    CurlResult list = curl(dir, {base + "/notes"});
    CHECK(contains(list.out, R"("title":"via nginx")"));
    CurlResult invalid = curl(dir, {"-H", "Content-Type: application/json", "--data",
                                    R"({"title":""})", "-w", " %{http_code}", base + "/notes"});
    CHECK(contains(invalid.out, " 422"));
    it::check_no_alerts(host);
  }

  TEST_CASE("metrics are keyed by the route that matched, not by the path a client sent") {
    HostProcess host(
        {"--app", FCGI_TEST_HANDLER_API_PLUGIN, "--workers", "1", "--status-path", "/status"});
    fcgi_test::Client c = host.connect();
    for (int i = 1; i <= 30; ++i)
      CHECK(c.request("GET", "/users/" + std::to_string(i)).status == 200);
    for (int i = 0; i < 70; ++i) // a scanner's distinct 404s
      CHECK(c.request("GET", "/scan/" + std::to_string(i) + ".php").status == 404);
    std::string page = c.request("GET", "/status?json").body;
    INFO(page);
    CHECK(page.find("\"route\":\"GET /users/{id:int}\",\"calls\":30") != std::string::npos);
    CHECK(page.find("\"route\":\"(no route)\",\"calls\":70") != std::string::npos);
    CHECK(page.find("/users/1\"") == std::string::npos);
    CHECK(page.find("/scan/") == std::string::npos);
  }
}
