#include "process_manager/worker_exit.hpp"

#include <csignal>
#include <doctest/doctest.h>
#include <sys/wait.h>

using namespace process_manager;

namespace {

ExitedChild exited(int code) {
  return classify(100, W_EXITCODE(code, 0));
}
ExitedChild killed(int sig) {
  return classify(100, sig);
}
ExitFacts booting() {
  return ExitFacts{};
}
ExitFacts serving() {
  ExitFacts f;
  f.ready = true;
  f.generation_ready = true;
  return f;
}

} // namespace

TEST_CASE("worker exit: any death before ready is a boot failure, whatever its form") {
  for (const ExitedChild& c : {exited(0), exited(1), exited(3), exited(127), killed(SIGABRT),
                               killed(SIGKILL), killed(SIGSEGV)}) {
    CAPTURE(describe(c));
    CHECK(classify_exit(c, booting()) == WorkerExit::BootFailure);
    ExitFacts generation_up = booting();
    generation_up.generation_ready = true; // a replacement that cannot boot, too
    const bool outside = c.kind == ExitedChild::Kind::Signaled && c.signal == SIGKILL;
    CHECK(classify_exit(c, generation_up) ==
          (outside ? WorkerExit::Crash : WorkerExit::BootFailure));
  }
}

TEST_CASE("worker exit: a SIGKILL of a booting replacement comes from outside: a crash") {
  ExitFacts replacement = booting();
  replacement.generation_ready = true; // the OOM killer or kill -9, while the others serve
  CHECK(classify_exit(killed(SIGKILL), replacement) == WorkerExit::Crash);
  CHECK(classify_exit(killed(SIGKILL), booting()) == WorkerExit::BootFailure); // at a start
}

TEST_CASE("worker exit: after ready, 0 is done, anything else a crash") {
  CHECK(classify_exit(exited(0), serving()) == WorkerExit::Done);
  CHECK(classify_exit(exited(1), serving()) == WorkerExit::Crash);
  CHECK(classify_exit(exited(3), serving()) == WorkerExit::Crash); // a program's own code 3
  CHECK(classify_exit(killed(SIGABRT), serving()) == WorkerExit::Crash);
  CHECK(classify_exit(killed(SIGKILL), serving()) == WorkerExit::Crash);
}

TEST_CASE("worker exit: the host's own \"could not boot\" is a boot failure even if late") {
  ExitFacts f = serving();
  f.boot_error = true;
  CHECK(classify_exit(exited(3), f) == WorkerExit::BootFailure);
}

TEST_CASE("worker exit: --exec inside the boot window is a boot failure only until its "
          "generation was ready") {
  ExitFacts f;
  f.ready_by_time = true;
  CHECK(classify_exit(exited(1), f) == WorkerExit::BootFailure); // --exec /bin/false at start
  CHECK(classify_exit(exited(0), f) == WorkerExit::BootFailure);
  f.generation_ready = true; // a replacement that crashes on an early request
  CHECK(classify_exit(exited(1), f) == WorkerExit::Crash);
  CHECK(classify_exit(killed(SIGSEGV), f) == WorkerExit::Crash);
  CHECK(classify_exit(exited(0), f) == WorkerExit::Done);
}

TEST_CASE("worker exit: a death is named by its signal or its code") {
  CHECK(describe_death(killed(SIGABRT)) == "died of SIGABRT");
  CHECK(describe_death(killed(SIGKILL)) == "died of SIGKILL");
  CHECK(describe_death(exited(1)) == "exited with code 1");
}
