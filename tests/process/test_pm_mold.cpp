// Process tests of the mold (process_manager/mold.hpp), with tiny lambda workers: the mold boots
// once and forks every worker, each the master's own child in its own slot; a mold whose boot
// fails stops the master with one line; a mold killed is started again and forks the next
// worker; a reload makes a new mold and the old one leaves.
#include "master_harness.hpp"
#include "process_manager/exit_codes.hpp"
#include "support/proc.hpp"

#include <algorithm>
#include <csignal>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <fstream>
#include <string>
#include <unistd.h>

using namespace process_manager;
using namespace pm_test;
using namespace std::chrono_literals;

namespace {

// A generation of `workers` forked by a mold whose boot counts itself (or fails with `fail`)
// and keeps a descriptor for the generation's next mold (a pipe's end, as a sealed copy would be).
Generation molded_generation(int workers, std::string fail = {}) {
  Generation g = generation(workers, well_behaved);
  g.mold = MoldPlan{};
  g.mold->boot = [fail](int kept_fd) {
    ++probe().mold_boots;
    if (kept_fd >= 0) ++probe().mold_kept;
    int ends[2] = {-1, -1};
    if (fail.empty() && ::pipe2(ends, O_CLOEXEC) == 0) ::close(ends[1]);
    return MoldBoot{fail, ends[0]};
  };
  return g;
}

bool named_as_mold(pid_t pid) {
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(comm, name);
  return name == kMoldProcessName;
}

// The master's children named as a mold (kMoldProcessName).
std::vector<pid_t> molds_of(pid_t master) {
  std::vector<pid_t> children = test_support::running_pids(
      [master](const test_support::ProcStat& s) { return s.ppid == master; });
  std::erase_if(children, [](pid_t p) { return !named_as_mold(p); });
  return children;
}

bool child_of(pid_t pid, pid_t parent) {
  const auto stat = test_support::proc_stat(pid);
  return stat && stat->ppid == parent;
}

} // namespace

TEST_CASE("mold: it boots once and forks every worker, each the master's child") {
  MasterUnderTest m(molded_generation(3));
  REQUIRE(m.wait_until([&] { return m.ready().size() == 3; }, 5s));
  CHECK(m.probe().mold_boots == 1);
  CHECK(m.probe().boots == 3);
  for (pid_t w : m.ready()) {
    CHECK(child_of(w, m.pid()));
    CHECK(!named_as_mold(w));
  }
  CHECK(molds_of(m.pid()).size() == 1);
  CHECK(m.log_count(R"(mold \d+ \(gen 1\) ready)") == 1);
  m.signal(SIGTERM);
  CHECK(m.wait_exit(3s) == exit_code::kOk);
}

TEST_CASE("mold: a boot that fails stops the master with code 1 and one line, no worker") {
  MasterUnderTest m(molded_generation(2, "the table's file is missing"));
  CHECK(m.wait_exit(5s) == exit_code::kFailure);
  CHECK(m.log_count("the mold of generation 1 could not boot: the table's file is missing; "
                    "stopping, the master exits with code 1") == 1);
  CHECK(m.probe().boots == 0);
}

TEST_CASE("mold: killed, it comes back and forks the next worker, and its workers serve on") {
  MasterUnderTest m(molded_generation(2));
  REQUIRE(m.wait_until([&] { return m.ready().size() == 2; }, 5s));
  const std::vector<pid_t> workers = m.ready();
  const std::vector<pid_t> molds = molds_of(m.pid());
  REQUIRE(molds.size() == 1);
  REQUIRE(::kill(molds[0], SIGKILL) == 0);
  CHECK(m.wait_log("mold " + std::to_string(molds[0]) +
                   R"( \(gen 1\) was killed by signal 9 .*its workers keep serving; a new mold)"));
  CHECK(m.wait_log(R"(mold \d+ \(gen 1\) ready)", 5s, 2));
  CHECK(m.probe().mold_boots == 2);
  CHECK(m.probe().mold_kept == 1); // the new mold boots from what the first one kept
  CHECK(m.ready() == workers);
  REQUIRE(::kill(workers[0], SIGKILL) == 0); // its replacement comes from the new mold
  CHECK(m.wait_until(
      [&] {
        auto now = m.ready();
        return now.size() == 2 && std::find(now.begin(), now.end(), workers[0]) == now.end();
      },
      5s));
  for (pid_t w : m.ready())
    CHECK(child_of(w, m.pid()));
  CHECK(m.probe().mold_boots == 2);
  m.signal(SIGTERM);
  CHECK(m.wait_exit(3s) == exit_code::kOk);
}

TEST_CASE("mold: a reload makes a new mold, and the old one leaves with its generation") {
  MasterOptions options;
  options.reload = [] { return std::optional<Generation>(molded_generation(2)); };
  MasterUnderTest m(molded_generation(2), options);
  REQUIRE(m.wait_until([&] { return m.ready(1).size() == 2; }, 5s));
  const std::vector<pid_t> first = molds_of(m.pid());
  REQUIRE(first.size() == 1);
  m.signal(SIGHUP);
  CHECK(m.wait_until([&] { return m.ready(2).size() == 2 && m.ready(1).empty(); }, 5s));
  CHECK(
      m.wait_log("mold " + std::to_string(first[0]) + R"( \(gen 1\) leaves with its generation)"));
  CHECK(m.wait_until(
      [&] {
        auto now = molds_of(m.pid());
        return now.size() == 1 && now[0] != first[0];
      },
      5s));
  CHECK(m.probe().mold_boots == 2);
  CHECK(m.probe().mold_kept == 0); // a reload's mold copies anew: nothing of the old one's
  m.signal(SIGTERM);
  CHECK(m.wait_exit(3s) == exit_code::kOk);
}
