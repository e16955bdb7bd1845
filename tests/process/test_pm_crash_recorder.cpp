// The crash recorder (--capture-crashes' hook in the fatal-signal handler) cannot keep a crashed
// worker alive: a fault inside it ends the worker at once (the handler is one-shot), long before
// the handler's alarm or the master's wait, and the master still writes its block.
#include "master_harness.hpp"
#include "process_manager/clock.hpp"
#include "process_manager/crash_report.hpp"
#include "process_manager/exit_codes.hpp"

#include <csignal>
#include <doctest/doctest.h>

using namespace process_manager;
using namespace pm_test;
using namespace std::chrono_literals;

namespace {

// No sanitizer check: the test needs the plain faults.
[[gnu::noinline, gnu::no_sanitize("address", "undefined")]] void fault(int value) {
  volatile int* volatile nowhere = nullptr;
  *nowhere = value;
}

void faulting_recorder(WorkerSlot&, int, void*) {
  fault(2);
}

// The first worker crashes inside a request, with a recorder that crashes too; the next serve.
int crash_twice_once(const WorkerContext& ctx) {
  if (probe().boots++ != 0) return serve(ctx);
  ctx.slot.state = WorkerState::Idle; // ready: a crash now is a crash, not a boot failure
  set_crash_recorder(faulting_recorder, nullptr);
  ctx.slot.request(0).request_start_ns = monotonic_ns();
  ctx.slot.state = WorkerState::Handling;
  fault(1);
  return 0;
}

} // namespace

TEST_CASE("master: a fault in the crash recorder still ends the worker at once, with its block") {
  MasterUnderTest m(generation(1, crash_twice_once));
  std::uint64_t start = monotonic_ns();
  REQUIRE(m.wait_log("killed by signal 11", 3s));
  // The handler's alarm is 10 s and the master waits up to 8 s for a waiting worker: neither ran.
  CHECK((monotonic_ns() - start) / 1'000'000 < 3000);
  CHECK(m.wait_log("no stack trace: the crash handler did not run"));
  REQUIRE(m.wait_until([&] { return m.ready().size() == 1 && m.probe().boots >= 2; }, 3s));
  CHECK(m.stop() == exit_code::kOk);
}
