#include "process_manager/master_state.hpp"

#include <csignal>
#include <doctest/doctest.h>

using namespace process_manager;
using namespace std::chrono_literals;

TEST_CASE("master state: allowed transitions") {
  CHECK(can_override(State::Running, State::Reloading));
  CHECK(can_override(State::Running, State::Stopping));
  CHECK(can_override(State::Running, State::FastStopping));
  CHECK_FALSE(can_override(State::Running, State::Stopped));

  CHECK(can_override(State::Reloading, State::Running));
  CHECK_FALSE(can_override(State::Reloading, State::Reloading)); // queued instead
  CHECK(can_override(State::Reloading, State::Stopping));

  CHECK_FALSE(can_override(State::Stopping, State::Stopping)); // a second TERM adds nothing
  CHECK(can_override(State::Stopping, State::FastStopping));   // INT escalates
  CHECK_FALSE(can_override(State::Stopping, State::Running));
  CHECK_FALSE(can_override(State::Stopping, State::Reloading));
  CHECK(can_override(State::Stopping, State::Stopped));

  CHECK_FALSE(can_override(State::FastStopping, State::Stopping));
  CHECK_FALSE(can_override(State::FastStopping, State::FastStopping));
  CHECK(can_override(State::FastStopping, State::Stopped));

  for (State to :
       {State::Running, State::Reloading, State::Stopping, State::FastStopping, State::Stopped})
    CHECK_FALSE(can_override(State::Stopped, to));
}

TEST_CASE("master state: only a serving master spawns") {
  CHECK(can_spawn(State::Running));
  CHECK(can_spawn(State::Reloading));
  CHECK_FALSE(can_spawn(State::Stopping));
  CHECK_FALSE(can_spawn(State::FastStopping));
  CHECK_FALSE(can_spawn(State::Stopped));
}

TEST_CASE("master state: escalation schedule") {
  Escalation graceful = escalation(StopReason::Graceful, 30s);
  CHECK(graceful.signal == SIGTERM);
  CHECK(graceful.kill_after == 30s);

  Escalation retire = escalation(StopReason::Retire, 5s);
  CHECK(retire.signal == SIGQUIT);
  CHECK(retire.kill_after == 5s);

  Escalation fast = escalation(StopReason::Fast, 30s);
  CHECK(fast.signal == SIGINT);
  CHECK(fast.kill_after == 1s);

  Escalation abandon = escalation(StopReason::Abandon, 30s);
  CHECK(abandon.signal == SIGINT);
  CHECK(abandon.kill_after == 1s);

  Escalation timeout = escalation(StopReason::Timeout, 30s);
  CHECK(timeout.signal == SIGKILL);
  CHECK(timeout.kill_after == 0s);
}
