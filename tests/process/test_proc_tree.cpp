// The master's own tree, as /proc shows it (process_manager/proc_children.hpp): what a control
// request's peer is checked against. And fork_clean's child is dumpable again under a parent
// that hid itself (process_manager/fork_clean.hpp), so the master still takes its stacks.
#include "process_manager/fork_clean.hpp"
#include "process_manager/proc_children.hpp"
#include "support/wait.hpp"

#include <doctest/doctest.h>

#include <csignal>
#include <fcntl.h>
#include <optional>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

// Reads one int from `fd`, or -1 at EOF.
int read_int(int fd) {
  int value = -1;
  return ::read(fd, &value, sizeof value) == static_cast<ssize_t>(sizeof value) ? value : -1;
}

} // namespace

TEST_CASE("descends_from: a child and a grandchild are this process's tree, its parent and init "
          "are not, and fork_clean's child is dumpable under a parent that is not") {
  int report[2], hold[2];
  REQUIRE(::pipe2(report, O_CLOEXEC) == 0);
  REQUIRE(::pipe2(hold, O_CLOEXEC) == 0);
  REQUIRE(::prctl(PR_SET_DUMPABLE, 0) == 0); // as a master not started as root does
  const pid_t child = process_manager::fork_clean([&](const sigset_t&) {
    // Only the test holds the write end of `hold`: its close is the grandchild's EOF.
    ::close(hold[1]);
    ::close(report[0]);
    int dumpable = ::prctl(PR_GET_DUMPABLE);
    (void)!::write(report[1], &dumpable, sizeof dumpable);
    const pid_t grandchild = ::fork();
    if (grandchild == 0) {
      char none;
      (void)!::read(hold[0], &none, 1); // until the test closes its end
      _exit(0);
    }
    int pid = grandchild;
    (void)!::write(report[1], &pid, sizeof pid);
    ::waitpid(grandchild, nullptr, 0);
    _exit(0);
  });
  ::prctl(PR_SET_DUMPABLE, 1);
  REQUIRE(child > 0);
  ::close(report[1]);
  ::close(hold[0]);
  const int dumpable = read_int(report[0]);
  const pid_t grandchild = read_int(report[0]);
  CHECK(dumpable == 1);
  REQUIRE(grandchild > 0);

  CHECK(process_manager::descends_from(::getpid(), ::getpid()));
  CHECK(process_manager::descends_from(child, ::getpid()));
  CHECK(process_manager::descends_from(grandchild, ::getpid()));
  CHECK(process_manager::descends_from(grandchild, child));
  CHECK_FALSE(process_manager::descends_from(::getppid(), ::getpid()));
  CHECK_FALSE(process_manager::descends_from(1, ::getpid()));
  CHECK_FALSE(process_manager::descends_from(::getpid(), child));

  ::close(hold[1]); // the grandchild returns, then the child
  ::close(report[0]);
  // Bounded: 5 s, then both (their signals blocked by fork_clean) are killed.
  const std::optional<int> exited = test_wait::wait_child_exit(child, test_wait::Millis{5000});
  if (!exited) {
    ::kill(grandchild, SIGKILL);
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
  }
  CHECK(exited == 0);
}
