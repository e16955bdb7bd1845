// What the root master does with the file --app names, when someone else could have put
// something there (docs/security.md, "The plugin file"): a link to a file the workers' user
// could not read, a FIFO, a huge sparse file are each refused with one line, at start and at a
// reload (HUP or --watch), and the master answers its status socket throughout: it never
// blocks on the file and never copies what it must not show.
#include "commands.hpp"
#include "harness.hpp"
#include "support/skip.hpp"
#include "throwaway_user.hpp"

#include <doctest/doctest.h>

#include <csignal>
#include <sys/stat.h>
#include <unistd.h>

namespace {

using it::HostOptions;
using it::HostProcess;
using it::Millis;

constexpr Millis kRefusalWait{15000};

// A host serving a copy of the fixture plugin as {dir}/libp.so, with its status socket.
HostOptions copied_plugin_host(std::vector<std::string> more = {}) {
  HostOptions o;
  o.args = {"--app", "{dir}/libp.so", "--workers", "1"};
  o.args.insert(o.args.end(), more.begin(), more.end());
  o.files = {{"libp.so", it::read_file(FCGI_TEST_VERSION_PLUGIN)}};
  o.status_socket = true;
  return o;
}

} // namespace

TEST_SUITE("plugin source") {

  TEST_CASE("a FIFO at the plugin path is refused with one line at a HUP and under --watch, "
            "and the master answers its status socket throughout") {
    HostProcess host(copied_plugin_host({"--watch", "on"}));
    host.allow_log("reload refused|changed; reloading");
    const std::string live = host.dir().file("libp.so");
    // The socket accepts before the watch is set: the master's loop answering says it is.
    REQUIRE(host.wait_master_turn());
    // Made beside it and renamed over it, as a build puts its output: --watch settles at once
    // (a file created in place is waited for until its writer closes it).
    const std::string fifo = host.dir().file("fifo.tmp");
    REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
    REQUIRE(::rename(fifo.c_str(), live.c_str()) == 0);
    // --watch sees the change and reloads; the reload refuses the FIFO.
    REQUIRE_MESSAGE(host.wait_log("reload refused.*not a regular file", kRefusalWait), host.log());
    CHECK(host.status_json() != "");
    host.signal(SIGHUP);
    REQUIRE_MESSAGE(host.wait_log("reload refused.*not a regular file", kRefusalWait, 2),
                    host.log());
    CHECK(host.status_json() != "");
    CHECK(host.wait_master_turn());
    CHECK(host.connect().request("GET", "/").status == 200); // the old generation serves on
    CHECK(it::lines_with(host.log(), "refused").size() == 2);
  }

  TEST_CASE("a plugin path that is a 300 MB sparse file is refused at start and at a HUP, one "
            "line each, before a byte is copied") {
    {
      it::TempDir dir;
      const std::string big = dir.write("big.so", "");
      REQUIRE(::truncate(big.c_str(), off_t{300} << 20) == 0);
      it::Command check = it::run_binary("--app " + big + " --test-config");
      CHECK(check.status != 0);
      CHECK_MESSAGE(it::lines_with(check.output, "larger than 256 MiB").size() == 1, check.output);
    }
    HostProcess host(copied_plugin_host());
    host.allow_log("reload refused");
    const std::string live = host.dir().file("libp.so");
    REQUIRE(::truncate(live.c_str(), off_t{300} << 20) == 0);
    host.signal(SIGHUP);
    REQUIRE_MESSAGE(host.wait_log("reload refused.*larger than 256 MiB", kRefusalWait), host.log());
    CHECK(host.status_json() != "");
    CHECK(host.connect().request("GET", "/").status == 200);
  }

  TEST_CASE("a plugin path that links to a file only root may read is never copied for the "
            "workers' user: one line at start") {
    it::ThrowawayUser throwaway;
    if (!throwaway.made()) {
      return test_support::skip(throwaway.why_not());
    }
    it::TempDir dir;
    const std::string secret = dir.write("secret", "root only\n");
    REQUIRE(::chmod(secret.c_str(), 0600) == 0);
    const std::string link = dir.file("libp.so");
    REQUIRE(::symlink(secret.c_str(), link.c_str()) == 0);
    it::Command check =
        it::run_binary("--app " + link + " --user " + throwaway.name() + " --test-config");
    CHECK(check.status != 0);
    CHECK_MESSAGE(it::lines_with(check.output, "not readable by the workers' user").size() == 1,
                  check.output);
    it::RunResult start = it::run_host(HostOptions{
        {"--app", link, "--user", throwaway.name()}, {}, it::Listen::UnixSocket, false});
    CHECK(start.status == 2);
    CHECK_MESSAGE(it::lines_with(start.output, "not readable by the workers' user").size() == 1,
                  start.output);
    CHECK(start.output.find("root only") == std::string::npos);
  }
}
