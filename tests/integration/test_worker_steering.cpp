// A worker never steers its master (docs/security.md, "What the master takes from the
// workers"): a control request (/control/scale, /control/reload) sent over the master's status
// socket by one of its workers, or a child of one, is refused even when that process runs as
// the master's own user; the same request from outside the master's tree is taken.
#include "commands.hpp"
#include "harness.hpp"

#include <doctest/doctest.h>

#include <string>

namespace {

using it::HostOptions;
using it::HostProcess;
using it::Millis;

} // namespace

TEST_SUITE("worker steering") {

  TEST_CASE("a scale request from a worker of the master's own user is refused (403); the same "
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
}
