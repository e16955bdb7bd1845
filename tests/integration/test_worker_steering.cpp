// A worker never steers its master (docs/security.md, "What the master takes from the
// workers"): a control request (/control/scale, /control/reload) sent over the master's status
// socket by one of its workers, or a child of one, is refused even when that process runs as
// the master's own user; the same request from outside the master's tree is taken. A master of
// a user other than root hides its memory and /proc files from its workers, and still takes a
// crashed worker's stack.
#include "commands.hpp"
#include "harness.hpp"
#include "support/skip.hpp"
#include "throwaway_user.hpp"

#include <doctest/doctest.h>

#include <pwd.h>
#include <string>
#include <sys/stat.h>

namespace {

using it::HostOptions;
using it::HostProcess;
using it::Millis;

} // namespace

TEST_SUITE("worker steering") {

  TEST_CASE("a scale request from a worker of the master's own user is refused (403), the same "
            "request from outside the master's tree is taken") {
    // The worker (an --exec shell, uid 0 as the master) asks its master to scale, notes the
    // answer, then serves as the echo program.
    const std::string ask = it::HostProcess::binary() +
                            " scale 3 --connect unix:{dir}/status.sock > {dir}/asked.txt 2>&1;"
                            " echo \"exit $?\" >> {dir}/asked.txt; exec " FCGI_TEST_LIBFCGI_ECHO;
    HostOptions o;
    o.args = {"--workers", "1", "--user", "root", "--exec", "/bin/sh", "-c", ask};
    o.status_socket = true;
    HostProcess host(o);
    const std::string asked = host.dir().file("asked.txt");
    REQUIRE_MESSAGE(
        it::wait_for([&] { return it::read_file(asked).find("exit ") != std::string::npos; },
                     Millis{10000}),
        host.log());
    const std::string answer = it::read_file(asked);
    INFO(answer);
    CHECK(answer.find("never from its workers") != std::string::npos);
    CHECK(answer.find("exit 0") == std::string::npos);
    CHECK(host.wait_master_turn());
    CHECK(host.worker_pids().size() == 1);

    it::Command outside =
        it::run_binary("scale 3 --connect unix:" + host.dir().file("status.sock"));
    CHECK_MESSAGE(outside.status == 0, outside.output);
    CHECK(host.wait_workers(3, Millis{10000}).size() == 3);
  }

  TEST_CASE("a master not started as root is not dumpable, its workers are, and a crashed "
            "worker's stack is still taken") {
    it::ThrowawayUser throwaway;
    if (!throwaway.made()) {
      return test_support::skip(throwaway.why_not());
    }
    const passwd* pw = ::getpwnam(throwaway.name().c_str());
    REQUIRE(pw != nullptr);
    const std::string uid = std::to_string(pw->pw_uid), gid = std::to_string(pw->pw_gid);
    // The host runs as the throwaway user in its own directory (its socket, its plugin copies).
    HostOptions o;
    // (The plugin as the throwaway user can read it, wherever the checkout lives.)
    o.args = {"--app", it::workers_fixture(FCGI_TEST_CRASH_PLUGIN), "--workers", "1"};
    o.wrapper = {"/bin/sh", "-c",
                 "chown " + uid + ":" + gid + " . && TMPDIR=$PWD exec /usr/bin/setpriv --reuid " +
                     uid + " --regid " + gid + " --clear-groups \"$@\"",
                 "sh"};
    HostProcess host(o);
    const std::vector<pid_t> workers = host.wait_workers(1);
    REQUIRE(workers.size() == 1);
    auto owner = [](pid_t pid) {
      struct stat st {};
      const std::string environ = "/proc/" + std::to_string(pid) + "/environ";
      return ::stat(environ.c_str(), &st) == 0 ? static_cast<long>(st.st_uid) : -1L;
    };
    // Not dumpable: the kernel gives its /proc files to root, out of its own user's reach.
    CHECK(owner(host.pid()) == 0);
    CHECK(owner(workers[0]) == static_cast<long>(pw->pw_uid));
    auto c = host.connect();
    c.set_keep_conn(false);
    CHECK_FALSE(c.request("GET", "/crash/segv").ended);
    CHECK_MESSAGE(host.wait_log("crash_in_named_function", Millis{10000}), host.log());
  }
}
