// USR2's fork (process_manager/binary_upgrade.hpp): a real child stands in for the new master,
// writing the ready byte or exiting without it, as a new binary would.
#include "process_manager/binary_upgrade.hpp"
#include "support/wait.hpp"

#include <doctest/doctest.h>
#include <unistd.h>

using namespace process_manager;
using namespace std::chrono_literals;

namespace {
// Starts a child that runs `exec`, waits for its pipe, and reaps it: what the master would see.
UpgradeOutcome run_upgrade(const std::function<void(int)>& exec, int& exit_code) {
  SignalPipe signals;
  UpgradeChild child;
  REQUIRE(child.start(signals, exec));
  REQUIRE(child.running());
  const pid_t pid = child.pid();
  REQUIRE(test_wait::wait_readable(child.pipe_fd(), 10s));
  UpgradeOutcome outcome = child.on_readable();
  CHECK_FALSE(child.running());
  CHECK(child.pipe_fd() == -1);
  exit_code = test_wait::wait_child_exit(pid, 10s).value_or(-2);
  return outcome;
}
} // namespace

TEST_CASE("binary upgrade: a new master that writes its ready byte takes over") {
  int code = 0;
  auto ready = [](int ready_fd) {
    int fd = ready_fd;
    write_ready_byte(fd);
  };
  CHECK(run_upgrade(ready, code) == UpgradeOutcome::Ready);
  CHECK(code == 127); // the stand-in returns: what a failed exec exits with
}

TEST_CASE("binary upgrade: a new master gone before its ready byte leaves the old one serving") {
  int code = 0;
  CHECK(run_upgrade([](int) {}, code) == UpgradeOutcome::Failed);
  CHECK(code == 127);
}
