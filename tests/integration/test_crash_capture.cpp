// --capture-crashes DIR and `fcgi-host replay FILE`: a crash keeps one file (mode 0600, the URI
// in it, the cookie's value not), the crash block names it, --capture-max-files holds, and the
// replay of that file with the same plugin dies the same way in one process (under gdb: stopped
// in the plugin's function); replayed with a handler that does not crash it prints the answer;
// a form body's password is redacted, a body is dropped (--capture-body off) or cut
// (--capture-max-bytes) and the file still replays; a garbage file is refused (exit 2); a
// directory the workers cannot write refuses the start.
#include "checks.hpp"
#include "child_process.hpp"
#include "commands.hpp"

#include <csignal>
#include <cstdlib>
#include <pwd.h>
#include <set>
#include <string>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

using fcgi_test::Millis;
using it::HostOptions;
using it::HostProcess;

using it::kCrashPlugin;

namespace {

const std::string kSecret = "sid=very-secret-value";

// A directory the workers may write: as root they run as nobody.
struct CaptureDir {
  it::TempDir dir;
  CaptureDir() {
    if (geteuid() == 0)
      if (passwd* pw = getpwnam("nobody"))
        REQUIRE(::chown(dir.path().c_str(), pw->pw_uid, -1) == 0);
  }
  std::string file(int n) const { return dir.file("crash-" + std::to_string(n) + ".fcgi"); }
};

std::vector<std::string> capture_args(const CaptureDir& d, std::vector<std::string> more = {}) {
  std::vector<std::string> args = {"--app", kCrashPlugin,        "--workers",
                                   "1",     "--capture-crashes", d.dir.path()};
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

// Sends a request that crashes the (one) worker, with a cookie; waits until it is replaced.
// Its crash block is rate-limited (a second a line): wait for it with wait_log when it matters.
void crash_once(HostProcess& host, const std::string& uri, const std::string& method = "GET",
                const std::string& body = {}, const fcgi_test::Params& params = {}) {
  std::vector<pid_t> before = host.wait_workers(1, Millis{10000});
  REQUIRE(before.size() == 1);
  auto c = host.connect();
  c.set_keep_conn(false);
  fcgi_test::Request r;
  r.method = method;
  r.uri = uri;
  r.body = body;
  r.extra_params = {{"HTTP_COOKIE", kSecret}};
  r.extra_params.insert(r.extra_params.end(), params.begin(), params.end());
  CHECK_FALSE(c.request(r).ended);
  REQUIRE(host.wait_worker_replaced(before[0], 1, Millis{10000}).size() == 1);
}

// GET /crash/segv?n=1..count, each on a connection of its own, sent once the previous one was
// taken by a worker (which then waits in its crash handler and takes no other): one crash per
// worker, well within a second. Needs the master's status socket (wait_accepted).
std::vector<fcgi_test::Client> crash_each_worker(HostProcess& host, int count) {
  std::vector<fcgi_test::Client> clients;
  for (int n = 1; n <= count; ++n) {
    clients.push_back(host.connect());
    fcgi_test::Request r;
    r.uri = "/crash/segv?n=" + std::to_string(n);
    clients.back().send_request(r);
    REQUIRE(host.wait_accepted());
  }
  return clients;
}

struct Replay {
  int status = -1; // exit code, or 128 + signal
  std::string output;
};

// `fcgi-host replay ARGS` as a child of its own (SIGSEGV not taken by ASan: the plain death).
Replay replay(const it::TempDir& scratch, const std::vector<std::string>& args,
              const std::string& prefix = {}) {
  const char* asan = std::getenv("ASAN_OPTIONS");
  std::vector<std::string> argv = {"/usr/bin/env", std::string("ASAN_OPTIONS=") +
                                                       (asan ? std::string(asan) + ":" : "") +
                                                       "handle_segv=0"};
  if (!prefix.empty())
    argv.insert(argv.end(), {"/usr/bin/gdb", "-batch", "-nx", "-ex", "run", "-ex", "bt", "--args"});
  argv.insert(argv.end(), {HostProcess::binary(), "replay"});
  argv.insert(argv.end(), args.begin(), args.end());
  std::string log = scratch.file("replay.log");
  pid_t pid = it::detail::spawn(argv, log, scratch.path());
  Replay r;
  std::optional<int> status = it::detail::reap(pid, Millis{60000});
  if (!status) it::detail::kill_group_and_reap(pid);
  r.status = status.value_or(-1);
  r.output = it::read_file(log);
  return r;
}

using it::has;

} // namespace

TEST_SUITE("crash capture") {
  TEST_CASE("a crash keeps one 0600 file with the URI, not the cookie, the block names it, its "
            "replay dies the same way") {
    CaptureDir d;
    HostProcess host(capture_args(d));
    REQUIRE(host.wait_workers(1).size() == 1);
    crash_once(host, "/crash/segv?user=42");
    REQUIRE(host.wait_log("request captured to", Millis{5000}));
    std::string capture = it::read_file(d.file(1));
    REQUIRE_FALSE(capture.empty());
    INFO("log:\n" << host.log());
    CHECK(has(host.log(), "  request captured to " + d.file(1) + "\n"));
    struct stat st {};
    REQUIRE(::stat(d.file(1).c_str(), &st) == 0);
    CHECK((st.st_mode & 07777) == 0600);
    CHECK(has(capture, "/crash/segv?user=42"));
    CHECK_FALSE(has(capture, "very-secret-value"));
    CHECK(has(capture, "HTTP_COOKIE" + std::string(kSecret.size(), 'x')));
    CHECK(has(capture, "signal: 11 (SIGSEGV)\n"));

    it::TempDir scratch;
    Replay r = replay(scratch, {d.file(1), "--app", kCrashPlugin});
    INFO("replay:\n" << r.output);
    CHECK(r.status == 128 + SIGSEGV);
    CHECK(has(r.output, "fcgi-host replay: GET /crash/segv?user=42 (captured "));
  }

  // A token in the query string is as secret as in a form or a header: the same names redacted.
  TEST_CASE("a capture of ?password=x&api_token=y holds neither value") {
    CaptureDir d;
    HostProcess host(capture_args(d));
    REQUIRE(host.wait_workers(1).size() == 1);
    crash_once(host, "/crash/segv?password=pw-9f3e&api_token=tok-7c1d&page=2");
    REQUIRE(host.wait_log("request captured to", Millis{5000}));
    std::string capture = it::read_file(d.file(1));
    REQUIRE_FALSE(capture.empty());
    INFO("capture:\n" << capture);
    CHECK_FALSE(has(capture, "pw-9f3e"));
    CHECK_FALSE(has(capture, "tok-7c1d"));
    CHECK(has(capture, "/crash/segv?password=xxxxxxx&api_token=xxxxxxxx&page=2"));
    CHECK(has(capture, "query:password"));
  }

  TEST_CASE("replay shows a captured URI's control bytes escaped, never as a terminal escape") {
    CaptureDir d;
    HostProcess host(capture_args(d));
    crash_once(host, "/crash/segv?x=\x1b[2J\x07"); // ESC, BEL: a terminal would act on them
    REQUIRE(host.wait_log("request captured to", Millis{5000}));
    it::TempDir scratch;
    Replay r = replay(scratch, {d.file(1), "--app", "echo"});
    INFO("replay:\n" << r.output);
    CHECK(r.status == 0);
    CHECK(has(r.output, "fcgi-host replay: GET /crash/segv?x=\\x1b[2J\\x07 (captured"));
  }

  TEST_CASE("under gdb the replay stops in the plugin's function") {
    CaptureDir d;
    HostProcess host(capture_args(d));
    crash_once(host, "/crash/segv");
    it::TempDir scratch;
    Replay r = replay(scratch, {d.file(1), "--app", kCrashPlugin}, "gdb");
    INFO("gdb:\n" << r.output);
    CHECK(has(r.output, "received signal SIGSEGV"));
    std::size_t frame0 = r.output.find("\n#0 ");
    REQUIRE(frame0 != std::string::npos);
    CHECK(has(r.output.substr(frame0, r.output.find('\n', frame0 + 1) - frame0),
              "crash_in_named_function"));
  }

  TEST_CASE("--capture-max-files holds: later crashes keep nothing, and their block says why") {
    HostOptions o;
    CaptureDir d;
    o.args = capture_args(d, {"--capture-max-files", "2"});
    o.allow_log = {"crash loop"};
    HostProcess host(o);
    for (int n = 1; n <= 3; ++n)
      crash_once(host, "/crash/segv?n=" + std::to_string(n));
    // Crash blocks are at most one a second: crash on (bounded) until one of a request not
    // kept is written.
    const std::string refused =
        "request not captured: " + d.dir.path() + " holds --capture-max-files (2) captures already";
    for (int n = 4; n <= 12 && !has(host.log(), refused); ++n) {
      crash_once(host, "/crash/segv?n=" + std::to_string(n));
      host.wait_log(refused, Millis{1500});
    }
    INFO("log:\n" << host.log());
    CHECK(has(host.log(), refused));
    CHECK(has(it::read_file(d.file(1)), "/crash/segv?n=1"));
    CHECK(has(it::read_file(d.file(2)), "/crash/segv?n=2"));
    CHECK(::access(d.file(3).c_str(), F_OK) != 0);
    CHECK(it::lines_with(host.log(), "request captured to ").size() <= 2);
  }

  TEST_CASE("a form body: its password redacted, replayed to echo, the answer shows what was "
            "kept, --set-param gives the cookie back") {
    CaptureDir d;
    HostProcess host(capture_args(d));
    std::string body = "user=ann&password=hunter2";
    crash_once(host, "/crash/segv", "POST", body,
               {{"CONTENT_TYPE", "application/x-www-form-urlencoded"},
                {"CONTENT_LENGTH", std::to_string(body.size())}});
    it::TempDir scratch;
    Replay r = replay(scratch, {d.file(1), "--app", "echo", "--set-param", "HTTP_COOKIE=sid=test"});
    INFO("replay:\n" << r.output);
    CHECK(r.status == 0);
    CHECK(has(r.output, "Status: 200"));
    CHECK(has(r.output, "uri=/crash/segv"));
    CHECK(has(r.output, "param HTTP_COOKIE=sid=test"));
    CHECK(has(r.output, "user=ann&password=xxxxxxx"));
    CHECK_FALSE(has(r.output, "hunter2"));
  }

  TEST_CASE("--capture-body off: no body in the file, the replay's CONTENT_LENGTH says so") {
    CaptureDir d;
    HostProcess host(capture_args(d, {"--capture-body", "off"}));
    crash_once(host, "/crash/segv", "POST", "the body",
               {{"CONTENT_TYPE", "text/plain"}, {"CONTENT_LENGTH", "8"}});
    CHECK_FALSE(has(it::read_file(d.file(1)), "the body"));
    it::TempDir scratch;
    Replay r = replay(scratch, {d.file(1), "--app", "echo"});
    INFO("replay:\n" << r.output);
    CHECK(r.status == 0);
    CHECK(has(r.output, "CONTENT_LENGTH 8 becomes 0"));
    CHECK(has(r.output, "param CONTENT_LENGTH=0"));
  }

  TEST_CASE("a body larger than --capture-max-bytes is cut, and the file still replays") {
    CaptureDir d;
    HostProcess host(capture_args(d, {"--capture-max-bytes", "4K"}));
    crash_once(host, "/crash/segv", "POST", std::string(20000, 'b'),
               {{"CONTENT_TYPE", "application/octet-stream"}});
    std::string capture = it::read_file(d.file(1));
    INFO("capture head:\n" << capture.substr(0, capture.find("\n\n")));
    CHECK(capture.size() < 4096 + 512); // the cap, and the text lines
    CHECK(has(capture, "request: "));
    CHECK(has(capture, " bytes, cut (--capture-max-bytes)\n"));
    it::TempDir scratch;
    Replay r = replay(scratch, {d.file(1), "--app", "echo"});
    INFO("replay:\n" << r.output.substr(0, 2000));
    CHECK(r.status == 0);
    CHECK(has(r.output, "CONTENT_LENGTH 20000 becomes "));
    CHECK(has(r.output, "Status: 200"));
  }

  TEST_CASE("replay refuses a garbage or truncated file with exit 2 and says why") {
    it::TempDir scratch;
    std::string garbage = scratch.write("garbage.fcgi", "GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    it::Command c = it::run_binary("replay " + garbage + " --app echo");
    CHECK(c.status == 2);
    CHECK(has(c.output, "garbage.fcgi: not a fcgi-host request capture"));
    std::string cut = scratch.write("cut.fcgi", "fcgi-host request capture 1\npid: 1\n\n\x01\x01");
    c = it::run_binary("replay " + cut + " --app echo");
    CHECK(c.status == 2);
    CHECK(has(c.output, "cut.fcgi: truncated: the records end inside a record at byte"));
    c = it::run_binary("replay --app echo");
    CHECK(c.status == 2);
    CHECK(has(c.output, "name the capture file first"));
  }

  TEST_CASE("a capture directory the workers cannot use refuses the start, naming the option") {
    it::TempDir scratch;
    it::Command c = it::run_binary("--test-config --capture-crashes " + scratch.file("missing"));
    CHECK(c.status == 2);
    CHECK(has(c.output, "--capture-crashes: \"" + scratch.file("missing") + "\": No such file"));
    c = it::run_binary("--test-config --capture-crashes relative/dir");
    CHECK(c.status == 2);
    CHECK(has(c.output, "--capture-crashes: must be an absolute path"));
    if (geteuid() == 0) { // the workers run as nobody: a 0700 root directory is not theirs
      c = it::run_binary("--test-config --capture-crashes " + scratch.path());
      CHECK(c.status == 2);
      CHECK(has(c.output, "is not a directory the workers' user (nobody:nogroup) may write"));
    }
  }

  TEST_CASE("a burst of 3 crashes within a second: 3 blocks, each naming its request and its "
            "capture file, and the route counts 3 crashed") {
    CaptureDir d;
    HostOptions o;
    o.args = {"--app", kCrashPlugin, "--workers", "3", "--capture-crashes", d.dir.path()};
    o.status_socket = true;
    HostProcess host(o);
    REQUIRE(host.wait_workers(3).size() == 3);
    std::vector<fcgi_test::Client> clients = crash_each_worker(host, 3);
    REQUIRE(host.wait_log("killed by signal 11", Millis{20000}, 3));
    REQUIRE(host.wait_log("request captured to", Millis{5000}, 3));
    const std::string log = host.log();
    INFO("log:\n" << log);
    // Each block: its exit line, then its request, then the file that kept it.
    std::set<std::string> files;
    for (int n = 1; n <= 3; ++n) {
      const std::string request =
          "request in flight: \"GET /crash/segv?n=" + std::to_string(n) + "\"";
      const std::size_t at = log.find(request);
      REQUIRE(at != std::string::npos);
      const std::size_t note = log.find("  request captured to ", at);
      REQUIRE(note != std::string::npos);
      CHECK(log.rfind("killed by signal 11", at) != std::string::npos);
      const std::string file = log.substr(note + 22, log.find('\n', note) - note - 22);
      CHECK(has(it::read_file(file), "/crash/segv?n=" + std::to_string(n)));
      files.insert(file);
    }
    CHECK(files.size() == 3);
    CHECK_FALSE(has(log, "suppressed"));
    // The crashed requests are their route's, as `crashed` (not calls).
    const std::string status = host.wait_status(
        [](const std::string& json) { return has(json, "\"crashed\":3"); }, Millis{5000});
    INFO(status);
    CHECK(has(status, "{\"route\":\"GET /crash/segv\",\"calls\":0,\"5xx\":0,\"crashed\":3"));
  }

  TEST_CASE("more crashes than a burst's blocks: the count comes when the burst is over, without "
            "a next crash") {
    HostOptions o;
    o.args = {"--app", kCrashPlugin, "--workers", "5"};
    o.status_socket = true;
    HostProcess host(o);
    REQUIRE(host.wait_workers(5).size() == 5);
    std::vector<fcgi_test::Client> clients = crash_each_worker(host, 5);
    // Each crash is written or counted: the first three of the burst have their block, the
    // others are counted in a line of their own on the master's timer, a second after they came
    // (a crash more than a second after the first finds its line's turn again: a slow machine
    // may spread the five).
    auto counted = [&] {
      std::size_t n = it::lines_with(host.log(), "killed by signal 11").size();
      for (const std::string& line : it::lines_with(host.log(), " more crash")) {
        const std::size_t at = line.find(" more crash");
        const std::size_t from = line.rfind(' ', at - 1) + 1;
        n += std::stoul(line.substr(from, at - from));
      }
      return n;
    };
    REQUIRE_MESSAGE(it::wait_for([&] { return counted() == 5; }, Millis{20000}), host.log());
    const std::string log = host.log();
    INFO("log:\n" << log);
    const std::size_t blocks = it::lines_with(log, "killed by signal 11").size();
    CHECK(blocks >= 3);
    CHECK(it::lines_with(log, "request in flight: \"GET /crash/segv?n=").size() == blocks);
    if (blocks < 5) CHECK(it::lines_with(log, " more crash").size() == 1);
    // Every crashed request is counted, written or not.
    fcgi_test::Client status = fcgi_test::Client::connect(host.dir().file("status.sock"));
    const std::string openmetrics = status.request("GET", "/status?openmetrics").body;
    INFO(openmetrics);
    CHECK(
        has(openmetrics, "fcgihost_handler_crashed_requests_total{route=\"GET /crash/segv\"} 5\n"));
  }
}
