#include "process_manager/worker_table.hpp"

#include <csignal>
#include <doctest/doctest.h>
#include <utility>

using namespace process_manager;

namespace {

// Adds a worker; returns its slot (a Child owns its log channel, so it is not copied).
std::size_t make(WorkerTable& t, pid_t pid, std::uint32_t gen) {
  Child w;
  w.pid = pid;
  w.slot = t.allocate_slot().value();
  w.generation = gen;
  std::size_t slot = w.slot;
  t.add(std::move(w));
  return slot;
}

} // namespace

TEST_CASE("worker table: slots are allocated lowest first and reused") {
  WorkerTable t(3);
  CHECK(make(t, 100, 1) == 0);
  CHECK(make(t, 101, 1) == 1);
  CHECK(make(t, 102, 1) == 2);
  CHECK_FALSE(t.allocate_slot().has_value());

  std::optional<Child> gone = t.remove(101);
  REQUIRE(gone);
  CHECK(gone->slot == 1);
  CHECK(t.find(101) == nullptr);
  CHECK_FALSE(t.remove(101).has_value());
  CHECK(make(t, 103, 1) == 1);
  CHECK(t.size() == 3);
}

TEST_CASE("worker table: counts by generation, stopping workers excluded") {
  WorkerTable t(8);
  make(t, 1, 1);
  make(t, 2, 1);
  make(t, 3, 2);
  CHECK(t.count_active(1) == 2);
  CHECK(t.count_active(2) == 1);
  CHECK(t.count_active_except(2) == 2);

  t.find(1)->stop_reason = StopReason::Retire;
  CHECK(t.count_active(1) == 1);
  CHECK(t.count_active_except(2) == 1);
}

TEST_CASE("worker table: each signal is sent at most once") {
  Child w;
  CHECK(w.mark_signalled(SIGQUIT));
  CHECK_FALSE(w.mark_signalled(SIGQUIT));
  CHECK(w.was_signalled(SIGQUIT));
  CHECK_FALSE(w.was_signalled(SIGKILL));
  CHECK(w.mark_signalled(SIGKILL));
  CHECK_FALSE(w.mark_signalled(SIGKILL));
}
