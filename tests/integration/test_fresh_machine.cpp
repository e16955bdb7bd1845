// The first hour on a fresh machine: a checkout where the workers' user cannot go (a clone in
// /root or in a mkdtemp() directory, 0700) is refused at start and by --test-config, naming the
// directory, instead of failing at the workers' exec; a handler whose threads open their
// database inside the sandbox fails to boot with a line that names the sandbox and the option
// that opens the path (with --threads 4, and with --threads 1, where on_worker_start opens it
// outside); --test-config warns about a listed path that --private-tmp hides.
#include "checks.hpp"
#include "commands.hpp"
#include "support/skip.hpp"

#include <cstdlib>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

using fcgi_test::Millis;
using it::has;

namespace {

// A directory only root may enter (as `git clone` into a mkdtemp() directory makes one), with
// a copy of a program the workers would run in it.
struct ClosedCheckout {
  it::TempDir dir; // mkdtemp: 0700
  std::string program = dir.path() + "/src/build/echo-program";
  ClosedCheckout() {
    std::filesystem::create_directories(dir.path() + "/src/build");
    std::filesystem::copy_file(FCGI_TEST_LIBFCGI_ECHO, program);
  }
};

} // namespace

TEST_SUITE("fresh machine") {
  TEST_CASE("--exec of a program the workers' user cannot reach: refused, naming the "
            "directory, by --test-config and at start") {
    if (::geteuid() != 0)
      return test_support::skip("needs root: workers run as the invoking user otherwise, who "
                                "reaches the program");
    ClosedCheckout checkout;
    it::TempDir run;
    const std::string args =
        "--listen unix:" + run.file("s.sock") + " --workers 1 --exec " + checkout.program;
    for (const std::string& mode : {std::string("--test-config "), std::string()}) {
      it::Command c = it::run_binary(mode + args);
      INFO(mode << "output: " << c.output);
      CHECK(c.status == 2);
      CHECK(has(c.output, "--exec: the workers' user (nobody:"));
      CHECK(has(c.output, "cannot reach the program \"" + checkout.program + "\": directory \"" +
                              checkout.dir.path() +
                              "\" (mode 0700, owner root) does not let "
                              "nobody:"));
    }
    // With the directory opened to others, the same start serves.
    REQUIRE(::chmod(checkout.dir.path().c_str(), 0711) == 0);
    it::HostProcess host({"--workers", "1", "--exec", checkout.program});
    CHECK(host.connect().request("GET", "/").status == 200);
  }

  TEST_CASE("--script-root the workers' user cannot reach: refused, naming the directory") {
    if (::geteuid() != 0)
      return test_support::skip("needs root: workers run as the invoking user otherwise");
    ClosedCheckout checkout;
    std::filesystem::create_directories(checkout.dir.path() + "/src/www");
    // (the host's options before --exec: what follows the program is its own)
    it::Command c = it::run_binary("--test-config --listen 127.0.0.1:1 --script-root " +
                                   checkout.dir.path() + "/src/www --exec /bin/cat");
    INFO(c.output);
    CHECK(c.status == 2);
    CHECK(has(c.output, "--script-root: the workers' user (nobody:"));
    CHECK(has(c.output, "directory \"" + checkout.dir.path() + "\" (mode 0700"));
  }

  TEST_CASE("--private-tmp on: --test-config warns about a listed path under /tmp") {
    if (::geteuid() != 0)
      return test_support::skip("--private-tmp needs root (it mounts the pool's /tmp)");
    // Under the machine's /tmp itself (the scratch $TMPDIR may be elsewhere), removed at the end.
    std::string listed = "/tmp/fcgi-it-private-XXXXXX";
    REQUIRE(::mkdtemp(listed.data()));
    it::TempDir run;
    it::Command c = it::run_binary("--test-config --listen unix:" + run.file("s.sock") +
                                   " --sandbox on --sandbox-write " + listed + " --private-tmp on");
    std::filesystem::remove_all(listed);
    INFO(c.output);
    CHECK(c.status == 0);
    CHECK(has(c.output, "fcgi-host: warning: --sandbox-write: \"" + listed +
                            "\" is under /tmp, which --private-tmp on replaces"));
    // Not said without --private-tmp.
    c = it::run_binary("--test-config --listen unix:" + run.file("s.sock") +
                       " --sandbox on --sandbox-write " + run.path());
    CHECK(c.status == 0);
    CHECK(!has(c.output, "--private-tmp on replaces"));
  }

  TEST_CASE("a database each handler thread opens inside the sandbox: the boot failure names the "
            "sandbox and --sandbox-write, listed, it serves with --threads 4 and 1") {
    it::TempDir data;
    if (::geteuid() == 0) REQUIRE(::chmod(data.path().c_str(), 0777) == 0); // workers: nobody
    const std::string db = data.file("notes.db");
    auto args = [&](const char* threads) {
      return std::vector<std::string>{"--app",     FCGI_TEST_NOTES_PLUGIN,
                                      "--workers", "1",
                                      "--threads", threads,
                                      "--sandbox", "on",
                                      "--env",     "NOTES_DB=" + db};
    };
    {
      it::HostOptions o;
      o.args = args("4");
      o.expect_log = {R"(failed to boot: .*the worker booted inside its sandbox \(--sandbox on)"};
      it::RunResult r = it::run_host(o, Millis{20000});
      INFO("output:\n" << r.output);
      CHECK(r.status == 1);
      CHECK(has(r.output, "on_thread_start and the requests run in it"));
      CHECK(has(r.output, "list its directory with --sandbox-write DIR"));
    }
    // on_worker_start opens it before the sandbox closes: --threads 1 boots without the list.
    {
      it::HostProcess host(args("1")); // waits until it serves (throws with the log if not)
      CHECK(it::lines_with(host.log(), "failed to boot").empty());
    }
    for (const char* threads : {"4", "1"}) {
      std::vector<std::string> listed = args(threads);
      listed.insert(listed.end(), {"--sandbox-write", data.path()});
      it::HostProcess host(listed);
      fcgi_test::Response r = host.connect().request("POST", "/notes", R"({"title":"listed"})",
                                                     {{"CONTENT_TYPE", "application/json"}});
      INFO("--threads " << threads << ": " << r.status << " " << r.body);
      CHECK(r.status == 201);
    }
  }
}
