// USR2: when an upgrade starts, and what the new master's ready pipe says
// (process_manager/binary_upgrade.hpp). Real pipes, no fork.
#include "process_manager/binary_upgrade.hpp"

#include <cerrno>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <unistd.h>

using namespace process_manager;

TEST_CASE("binary upgrade: USR2 starts one only when supported, running, and none in progress") {
  CHECK_FALSE(why_not_upgrade(true, false, State::Running));
  CHECK(why_not_upgrade(false, false, State::Running) ==
        "USR2: binary upgrade not supported by this program");
  CHECK(why_not_upgrade(true, true, State::Running) == "USR2 ignored: an upgrade is in progress");
  CHECK(why_not_upgrade(true, false, State::Reloading) ==
        std::string("USR2 ignored: ") + to_string(State::Reloading));
  CHECK(why_not_upgrade(true, false, State::Stopping).has_value());
}

TEST_CASE("binary upgrade: the ready byte hands over, an end of file or an error does not") {
  CHECK(ready_outcome(1, 0) == UpgradeOutcome::Ready);
  CHECK(ready_outcome(0, 0) == UpgradeOutcome::Failed);
  CHECK(ready_outcome(-1, EIO) == UpgradeOutcome::Failed);
  CHECK(ready_outcome(-1, EINTR) == UpgradeOutcome::Pending);
  CHECK(ready_outcome(-1, EAGAIN) == UpgradeOutcome::Pending);
}

TEST_CASE("binary upgrade: the new master's ready byte goes through the pipe, which it closes") {
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC | O_NONBLOCK) == 0);
  int write_end = fds[1];
  write_ready_byte(write_end);
  CHECK(write_end == -1);
  char buf[2];
  CHECK(::read(fds[0], buf, sizeof buf) == 1); // the byte, then the end: the writer is closed
  CHECK(buf[0] == 'R');
  CHECK(ready_outcome(::read(fds[0], buf, sizeof buf), errno) == UpgradeOutcome::Failed);
  ::close(fds[0]);
  int none = -1;
  write_ready_byte(none); // not started by an upgrade: nothing
  CHECK(none == -1);
}
