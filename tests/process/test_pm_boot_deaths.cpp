// Process tests of boot deaths (process_manager/worker_exit.hpp): a worker that dies before it
// is ready — abort(), exit(1), a SIGKILL while it boots — stops the master at a fresh start with
// one line and exit code 1, and at a reload leaves the old generation serving.
#include "master_harness.hpp"
#include "process_manager/exit_codes.hpp"

#include <csignal>
#include <cstdlib>
#include <doctest/doctest.h>
#include <sys/resource.h>
#include <unistd.h>

using namespace process_manager;
using namespace pm_test;
using namespace std::chrono_literals;

namespace {

int abort_at_boot(const WorkerContext&) {
  probe().boots++;
  rlimit none{0, 0}; // no core file from a test
  setrlimit(RLIMIT_CORE, &none);
  std::abort();
}

int exit_1_at_boot(const WorkerContext&) {
  probe().boots++;
  _exit(1); // what exit(1) in a handler's start hook ends in, without the test's atexit handlers
}

// Holds its boot until the test lets it go (or kills it, which is the point).
int hold_boot(const WorkerContext& ctx) {
  probe().boots++;
  probe().booting = getpid();
  test_wait::wait_until([] { return probe().let_boot == 1; }, 10s);
  return serve(ctx);
}

struct Form {
  const char* name;
  std::function<int(const WorkerContext&)> main;
  const char* line;          // the one line's words (a regex)
  bool killed_while_booting; // the test kills the worker that holds its boot
};

// The three forms; the SIGKILL one needs the test to kill the booting worker.
std::vector<Form> forms() {
  return {{"abort", abort_at_boot, "died of SIGABRT before it was ready \\(boot failure\\)", false},
          {"exit(1)", exit_1_at_boot, "exited with code 1 before it was ready \\(boot failure\\)",
           false},
          {"SIGKILL", hold_boot, "died of SIGKILL before it was ready \\(boot failure\\)", true}};
}

void kill_booting_worker(MasterUnderTest& m) {
  REQUIRE(m.wait_until([&] { return m.probe().booting.load() > 0; }, 3s));
  REQUIRE(kill(m.probe().booting, SIGKILL) == 0);
}

} // namespace

TEST_CASE("master: a worker that dies before it is ready stops the master at start: one line, "
          "exit 1, no respawn loop (abort, exit(1), SIGKILL while booting)") {
  for (const Form& f : forms()) {
    CAPTURE(f.name);
    MasterUnderTest m(generation(1, f.main));
    if (f.killed_while_booting) kill_booting_worker(m);
    CHECK(m.wait_exit(3s) == exit_code::kFailure);
    INFO(m.log());
    CHECK(m.log_count(std::string("worker [0-9]+ ") + f.line +
                      "; stopping, the master exits with code 1") == 1);
    CHECK(m.log_count("respawn|crash") == 0);
    CHECK(m.probe().boots == 1);
  }
}

TEST_CASE("master: a worker of a new generation that dies before it is ready abandons the "
          "reload: the old generation keeps serving (abort, exit(1), SIGKILL while booting)") {
  for (const Form& f : forms()) {
    CAPTURE(f.name);
    static std::function<int(const WorkerContext&)> next;
    next = f.main;
    MasterOptions options;
    options.reload = [] { return std::optional<Generation>(generation(2, next)); };
    MasterUnderTest m(generation(2, well_behaved), options);
    REQUIRE(m.wait_until([&] { return m.ready(1).size() == 2; }, 3s));
    std::vector<pid_t> before = m.ready(1);
    m.signal(SIGHUP);
    if (f.killed_while_booting) kill_booting_worker(m);
    CHECK(m.wait_log(std::string(f.line) + "; abandoning generation 2, keeping generation 1"));
    CHECK(m.wait_master_turn());
    CHECK(m.ready(1) == before);
    CHECK(m.ready(2).empty());
    CHECK(m.wait_exit(0ms) == -1); // still running
    INFO(m.log());
    CHECK(m.log_count("abandoning generation") == 1);
    m.signal(SIGTERM);
    CHECK(m.wait_exit(3s) == exit_code::kOk);
  }
}
