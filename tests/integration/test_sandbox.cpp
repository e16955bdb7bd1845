// --sandbox: a handler confined by Landlock and the seccomp filter is refused what the sandbox
// does not list (other files, /tmp, exec, ptrace, mount) and allowed what it does; --private-tmp
// gives the pool a /tmp of its own; the master still takes a sandboxed worker's stacks; an
// --exec program (php-cgi) under --script-root and --script-extensions gets only the scripts
// the host lets through (it answers 404 for the others); a kernel without
// Landlock (simulated) is refused at start and by --test-config unless best-effort.
#include "checks.hpp"
#include "support/skip.hpp"

#include <set>
#include <sys/stat.h>
#include <unistd.h>

using fcgi_test::Millis;
using it::HostOptions;
using it::HostProcess;

using it::kCrashPlugin;
using it::kSandboxPlugin;

namespace {

std::string get(const HostProcess& host, const std::string& uri) {
  fcgi_test::Response r = host.connect().request("GET", uri);
  INFO(uri << " answered " << r.status << ": " << r.body);
  CHECK(r.status == 200);
  return r.body;
}

using it::has;

// Workers as root (--user root): the kernel's file modes refuse nothing, so every refusal below
// is the sandbox's, and capabilities dropped make root an ordinary process.
std::vector<std::string> sandboxed(std::vector<std::string> extra) {
  std::vector<std::string> args = {"--app",  kSandboxPlugin, "--workers", "1",
                                   "--user", "root",         "--sandbox", "on"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

} // namespace

TEST_SUITE("sandbox") {
  TEST_CASE("without --sandbox the handler reads /etc/hostname and writes /tmp (the control)") {
    HostProcess host({"--app", kSandboxPlugin, "--workers", "1", "--user", "root"});
    CHECK(has(get(host, "/read?path=/etc/hostname"), "ok "));
    CHECK(get(host, "/write?path=" + host.dir().file("free.txt")) == "ok written\n");
  }

  TEST_CASE("--sandbox on: files outside the lists, /tmp, exec, ptrace and mount are refused") {
    it::TempDir data;
    std::string allowed = data.write("readable/conf.txt", "listed for reading\n");
    data.write("writable/.keep", "");
    HostProcess host(sandboxed(
        {"--sandbox-read", data.file("readable"), "--sandbox-write", data.file("writable")}));
    CHECK(get(host, "/read?path=/etc/shadow") == "refused EACCES\n");
    CHECK(get(host, "/read?path=/etc/hostname") == "refused EACCES\n");
    CHECK(get(host, "/read?path=" + allowed) == "ok listed for reading\n");
    CHECK(get(host, "/read?path=/etc/resolv.conf").starts_with("ok")); // the system list
    CHECK(get(host, "/write?path=" + data.file("writable/out.txt")) == "ok written\n");
    CHECK(test_support::read_file(data.file("writable/out.txt")) == "written\n");
    CHECK(get(host, "/write?path=" + data.file("readable/out.txt")) == "refused EACCES\n");
    CHECK(get(host, "/write?path=" + host.dir().file("tmp.txt")) == "refused EACCES\n");
    CHECK(::access(host.dir().file("tmp.txt").c_str(), F_OK) != 0);
    CHECK(get(host, "/exec") == "refused EPERM\n");
    CHECK(get(host, "/ptrace-master") == "refused EPERM\n");
    CHECK(get(host, "/mount") == "refused EPERM\n");
  }

  TEST_CASE("--sandbox on, workers of the master's own user: a SIGHUP, a prlimit and a "
            "setpriority on the master are refused, without the sandbox the last two pass") {
    {
      HostProcess open({"--app", kSandboxPlugin, "--workers", "1", "--user", "root"});
      CHECK(get(open, "/prlimit-master") == "ok prlimit\n");
      CHECK(get(open, "/renice-master") == "ok renice\n");
    }
    HostProcess host(HostOptions{sandboxed({}), {}, it::Listen::UnixSocket, true, true});
    CHECK(get(host, "/prlimit-master") == "refused EPERM\n");
    CHECK(get(host, "/renice-master") == "refused EPERM\n");
    const bool scoped = has(host.status_json(), "abstract sockets scoped");
    if (!scoped) return test_support::skip("Landlock before ABI 6: signals are not scoped here");
    CHECK(get(host, "/hup-master") == "refused EPERM\n");
    CHECK(host.wait_master_turn());
    CHECK_FALSE(has(host.log(), "HUP:"));
  }

  TEST_CASE("--sandbox on: a chmod of the handler's own file outside the write list, an inotify "
            "watch of /etc, memfd_create, and a TCP connection to a port not listed are refused, "
            "a listed port connects") {
    it::TempDir data;
    const std::string own = data.write("own.txt", "the handler's own file\n");
    data.write("writable/.keep", "");
    // The listed port: the host's own (a worker connecting there is taken into the backlog).
    // The other, its neighbour: Landlock refuses it before any listener is looked for.
    const int port = it::free_tcp_port();
    const std::string listed = std::to_string(port);
    const std::string unlisted = std::to_string(port < 65535 ? port + 1 : port - 1);
    HostOptions o{sandboxed({"--sandbox-write", data.file("writable"), "--sandbox-connect",
                             "localhost:" + listed, "--listen", "127.0.0.1:" + listed}),
                  {},
                  it::Listen::AsGiven,
                  true,
                  true};
    HostProcess host(o);
    CHECK(get(host, "/chmod?path=" + own) == "refused EPERM\n");
    CHECK(get(host, "/chmod?path=" + data.file("writable/.keep")) == "refused EPERM\n");
    struct stat st {};
    REQUIRE(::stat(own.c_str(), &st) == 0);
    CHECK((st.st_mode & 0777) != 0666);
    CHECK(get(host, "/watch?path=/etc") == "refused EPERM\n");
    CHECK(get(host, "/memfd") == "refused EPERM\n");
    if (!has(host.status_json(), "TCP connect to port " + listed)) {
      return test_support::skip("Landlock before ABI 4: TCP is not restricted here");
    }
    CHECK(get(host, "/connect?port=" + unlisted) == "refused EACCES\n");
    CHECK(get(host, "/connect?port=" + listed) == "ok connected\n");
  }

  TEST_CASE("without --sandbox the same chmod, watch and memfd pass, and the connection reaches "
            "the port (the control)") {
    it::TempDir data;
    const std::string own = data.write("own.txt", "x\n");
    HostProcess host({"--app", kSandboxPlugin, "--workers", "1", "--user", "root"});
    CHECK(get(host, "/chmod?path=" + own) == "ok chmod\n");
    CHECK(get(host, "/watch?path=/etc") == "ok watching\n");
    CHECK(get(host, "/memfd") == "ok memfd\n");
    CHECK(get(host, "/connect?port=" + std::to_string(it::free_tcp_port())) ==
          "refused ECONNREFUSED\n");
  }

  TEST_CASE("--sandbox-exec on: the handler may run /bin/true") {
    HostProcess host(sandboxed({"--sandbox-exec", "on"}));
    CHECK(get(host, "/exec") == "ok exit 0\n");
    CHECK(get(host, "/ptrace-master") == "refused EPERM\n");
  }

  TEST_CASE("--sandbox log: a listed call passes the filter (logged by the kernel), Landlock "
            "still holds") {
    HostProcess host(
        {"--app", kSandboxPlugin, "--workers", "1", "--user", "root", "--sandbox", "log"});
    // execve is let through by the filter; the file is then refused by Landlock (not
    // executable for the worker), which EACCES shows instead of the filter's EPERM.
    CHECK(get(host, "/exec") == "refused EACCES\n");
    CHECK(get(host, "/read?path=/etc/hostname") == "refused EACCES\n");
  }

  TEST_CASE("--private-tmp on: the pool's /tmp is its own, writable, and the machine's is hidden") {
    HostProcess host(sandboxed({"--private-tmp", "on"}));
    const std::string name = "/tmp/fcgi-host-private-tmp-test-" + std::to_string(host.pid());
    CHECK(get(host, "/write?path=" + name) == "ok written\n");
    CHECK(get(host, "/read?path=" + name) == "ok written\n");
    CHECK(::access(name.c_str(), F_OK) != 0); // not in the machine's /tmp
    // The test's own directory under the machine's /tmp is not there for the worker.
    CHECK(get(host, "/read?path=" + host.dir().file("host.log")) == "refused ENOENT\n");
  }

  TEST_CASE("a crash under the sandbox: the native stack with the function name, and the "
            "worker's own capture of the request") {
    it::TempDir captures; // written by the worker (--user root), inside its write list
    HostProcess host({"--app", kCrashPlugin, "--workers", "1", "--user", "root", "--sandbox", "on",
                      "--capture-crashes", captures.path()});
    REQUIRE(host.wait_workers(1).size() == 1);
    auto c = host.connect();
    c.set_keep_conn(false);
    CHECK_FALSE(c.request("GET", "/crash/segv").ended);
    REQUIRE(host.wait_log("crash_in_named_function", Millis{5000}));
    CHECK(it::lines_with(host.log(), "no stack trace").empty());
    CHECK(it::lines_with(host.log(), "request not captured").empty());
    CHECK(::access(captures.file("crash-1.fcgi").c_str(), F_OK) == 0);
  }

  TEST_CASE("the master takes one stack of a slow sandboxed request (it attaches from outside)") {
    HostProcess host({"--app", kCrashPlugin, "--workers", "1", "--sandbox", "on",
                      "--slow-request-threshold", "0.1"});
    CHECK(host.connect().request("GET", "/slow?ms=600").status == 200);
    REQUIRE(host.wait_log("sleep_in_named_function", Millis{5000}));
  }

  TEST_CASE("the status page shows the pool's sandbox") {
    HostProcess host(sandboxed({"--status-path", "/status"}));
    std::string page = host.connect().request("GET", "/status?json").body;
    CHECK(has(page, "\"sandbox\":\"on: landlock ABI "));
    CHECK(has(page, "seccomp deny-list (exec refused)"));
  }

  TEST_CASE("a kernel without Landlock (simulated): start and --test-config refuse, one line") {
    it::ScopedEnv no_landlock("FCGI_HOST_TEST_LANDLOCK_ABI", "0");
    const std::string line = "--sandbox: this kernel has no Landlock";
    for (bool test_config : {true, false}) {
      HostOptions o;
      o.args = {"--app", "hello", "--workers", "1", "--sandbox", "on"};
      if (test_config) o.args.push_back("--test-config");
      o.wait_ready = false;
      it::RunResult r = it::run_host(o);
      INFO(r.output);
      CHECK(r.status == 2);
      CHECK(it::lines_with(r.output, line).size() == 1);
    }
    HostOptions o;
    o.args = {"--app", "hello", "--workers", "1", "--sandbox", "best-effort", "--test-config"};
    o.wait_ready = false;
    it::RunResult r = it::run_host(o);
    CHECK(r.status == 0);
    CHECK(has(r.output, "sandbox best-effort: landlock unavailable, signals and abstract sockets "
                        "not scoped (Landlock ABI < 6), seccomp deny-list"));
  }

  TEST_CASE("--test-config shows each pool's sandbox, and each pool's start says the same in "
            "one line") {
    HostOptions o;
    o.args = {"--config", "{dir}/host.conf", "--test-config"};
    o.listen = it::Listen::AsGiven; // each pool its own socket
    o.files = {{"host.conf", "[a]\nlisten = {dir}/a.sock\napp = hello\nsandbox = on\n"
                             "sandbox-read = /etc/hostname\nsandbox-connect = db:5432\n"
                             "[b]\nlisten = {dir}/b.sock\napp = hello\n"}};
    o.wait_ready = false;
    it::RunResult r = it::run_host(o);
    INFO(r.output);
    CHECK(r.status == 0);
    CHECK(has(r.output, "fcgi-host: pool a: sandbox on: landlock ABI "));
    CHECK(has(r.output, "read 1, write 0 paths; TCP "));
    CHECK(has(r.output, "fcgi-host: pool b: sandbox off\n"));
    const std::size_t at = r.output.find("pool a: sandbox ") + 7;
    const std::string pool_a = r.output.substr(at, r.output.find('\n', at) - at);

    o.args = {"--config", "{dir}/host.conf"};
    o.wait_ready = false;
    HostProcess host(o);
    REQUIRE_MESSAGE(host.wait_log(R"(\[a\].*sandbox on: landlock)", Millis{10000}), host.log());
    REQUIRE(host.wait_log(R"(\[b\].*sandbox off)", Millis{10000}));
    const std::vector<std::string> a = it::lines_with(host.log(), pool_a);
    CHECK_MESSAGE(a.size() == 1, host.log());
    CHECK(it::lines_with(host.log(), "sandbox off").size() == 1);
  }

  TEST_CASE("best-effort without Landlock serves, and says once what it could not apply") {
    it::ScopedEnv no_landlock("FCGI_HOST_TEST_LANDLOCK_ABI", "0");
    HostProcess host({"--app", kSandboxPlugin, "--workers", "1", "--sandbox", "best-effort"});
    host.expect_log("sandbox best-effort, not applied: no Landlock");
    CHECK(has(get(host, "/read?path=/etc/hostname"), "ok ")); // files are not restricted
    CHECK(get(host, "/mount") == "refused EPERM\n");          // the filter is there
  }

  TEST_CASE("a reload that turns the sandbox on starts a generation under it") {
    HostOptions o;
    o.args = {"--config", "{dir}/host.conf"};
    o.files = {{"host.conf", "app = " + kSandboxPlugin + "\nworkers = 1\nuser = root\n"}};
    HostProcess host(o);
    CHECK(has(get(host, "/read?path=/etc/hostname"), "ok "));
    host.dir().write("host.conf",
                     "app = " + kSandboxPlugin + "\nworkers = 1\nuser = root\nsandbox = on\n");
    host.signal(SIGHUP);
    REQUIRE(host.wait_log("ready; retiring"));
    CHECK(get(host, "/read?path=/etc/hostname") == "refused EACCES\n");
  }

  TEST_CASE("php-cgi under --script-root: a script inside is served, outside, .. and a symlink "
            "out answered 404 by the host") {
    if (::access("/usr/bin/php-cgi", X_OK) != 0) {
      test_support::skip("php-cgi not installed (apt-get install php8.2-cgi)");
      return;
    }
    it::TempDir site;
    REQUIRE(::chmod(site.path().c_str(), 0755) == 0);
    std::string inside = site.write("root/hello.php", "<?php echo 'inside ok';");
    std::string text = site.write("root/notes.txt", "<?php echo 'text run';");
    std::string outside = site.write("secret.php", "<?php echo 'outside read';");
    REQUIRE(::symlink(outside.c_str(), site.file("root/link.php").c_str()) == 0);
    // php-cgi's opcache keeps a lock file (in /tmp, which the sandbox refuses): a directory
    // of its own, listed for writing.
    site.write("opcache/.keep", "");
    REQUIRE(::chmod(site.file("opcache").c_str(), 0777) == 0);
    // Without --sandbox too: the host's check is its own, the kernel's is the second wall.
    for (bool sandbox : {true, false}) {
      INFO("--sandbox " << (sandbox ? "on" : "off"));
      std::vector<std::string> args = {
          "--workers", "1", "--script-root", site.file("root"), "--script-extensions", ".php"};
      if (sandbox)
        args.insert(args.end(), {"--sandbox", "on", "--sandbox-read", "/etc/php", "--sandbox-write",
                                 site.file("opcache")});
      args.insert(args.end(), {"--exec", "/usr/bin/php-cgi", "-d",
                               "opcache.lockfile_path=" + site.file("opcache")});
      HostProcess host(args);
      host.expect_log("script refused with 404");
      // One kept connection for every request: the host answers the refused ones and relays
      // the others on the same connection.
      auto connection = host.connect();
      auto request = [&](const std::string& script) {
        fcgi_test::Params p{{"SCRIPT_FILENAME", script}};
        return connection.request("GET", "/x.php", {}, p);
      };
      fcgi_test::Response ok = request(inside);
      CHECK(ok.status == 200);
      CHECK(ok.body == "inside ok");
      for (const std::string& refused :
           {outside, site.file("root/../secret.php"), site.file("root/link.php"), text}) {
        fcgi_test::Response r = request(refused);
        INFO(refused << ": " << r.status << " " << r.body);
        CHECK(r.status == 404);
        CHECK_FALSE(has(r.body, "outside read"));
        CHECK_FALSE(has(r.body, "text run"));
      }
      CHECK(request(site.file("root/hello.php/path/info")).body == "inside ok");
      CHECK(request(inside).body == "inside ok"); // the program still serves after refusals
      REQUIRE(host.wait_log("script refused with 404: \"" + text));
      CHECK(it::lines_with(host.log(), "script refused with 404").size() == 4);
      CHECK(it::lines_with(host.log(), "outside --script-root").size() == 3);
    }
  }

  TEST_CASE("php-cgi behind the host: 1 MiB each way passes, a connection the client does not keep "
            "is closed after its answer, the program's exit ends its worker, which is replaced") {
    if (::access("/usr/bin/php-cgi", X_OK) != 0) {
      test_support::skip("php-cgi not installed (apt-get install php8.2-cgi)");
      return;
    }
    it::TempDir site;
    REQUIRE(::chmod(site.path().c_str(), 0755) == 0);
    std::string script = site.write("root/n.php", "<?php echo getmypid();");
    // Two requests per program: the relay's count (php-cgi's own is turned off).
    HostProcess host({"--workers", "1", "--env", "PHP_FCGI_MAX_REQUESTS=2", "--script-root",
                      site.file("root"), "--exec", "/usr/bin/php-cgi"});
    std::set<std::string> programs;
    for (int i = 0; i < 5; ++i) {
      auto c = host.connect();
      c.set_keep_conn(false);
      fcgi_test::Response r = c.request("GET", "/n.php", {}, {{"SCRIPT_FILENAME", script}});
      INFO("request " << i << ": " << r.status << " " << r.body);
      REQUIRE(r.status == 200);
      programs.insert(r.body);
    }
    CHECK(programs.size() == 3); // 2 + 2 + 1 requests
    // A body and an answer larger than the sockets' buffers go through the relay both ways.
    std::string echo = site.write("root/echo.php", "<?php $in = file_get_contents('php://input');"
                                                   " echo strlen($in), ' ', md5($in), ' ',"
                                                   " str_repeat('y', 1 << 20);");
    std::string body(1 << 20, 'x');
    auto c = host.connect();
    fcgi_test::Response big =
        c.request("POST", "/echo.php", body,
                  {{"SCRIPT_FILENAME", echo}, {"CONTENT_TYPE", "application/octet-stream"}});
    CHECK(big.status == 200);
    CHECK(big.body.starts_with("1048576 "));
    CHECK(big.body.size() == std::string("1048576 ").size() + 32 + 1 + (1u << 20));
  }
}
