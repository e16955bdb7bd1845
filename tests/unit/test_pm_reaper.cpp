#include "process_manager/reaper.hpp"

#include <cerrno>
#include <csignal>
#include <doctest/doctest.h>
#include <memory>
#include <sys/wait.h>
#include <utility>

using namespace process_manager;

namespace {

// Plays back canned waitpid() results, then ECHILD.
Reaper canned(std::vector<std::pair<pid_t, int>> results) {
  auto next = std::make_shared<std::size_t>(0);
  return Reaper([results, next](int* status) -> pid_t {
    if (*next == results.size()) {
      errno = ECHILD;
      return -1;
    }
    auto [pid, st] = results[(*next)++];
    *status = st;
    return pid;
  });
}

} // namespace

TEST_CASE("reaper: classifies every status with the wait macros") {
  Reaper r = canned({{10, W_EXITCODE(0, 0)},
                     {11, W_EXITCODE(3, 0)},
                     {12, SIGSEGV | WCOREFLAG},
                     {13, SIGKILL},
                     {99999, W_EXITCODE(1, 0)}});
  std::vector<ExitedChild> out = r.reap();
  REQUIRE(out.size() == 5);

  CHECK(out[0].pid == 10);
  CHECK(out[0].kind == ExitedChild::Kind::Exited);
  CHECK(out[0].code == 0);

  CHECK(out[1].kind == ExitedChild::Kind::Exited);
  CHECK(out[1].code == 3);

  CHECK(out[2].kind == ExitedChild::Kind::Signaled);
  CHECK(out[2].signal == SIGSEGV);
  CHECK(out[2].core);
  CHECK(describe(out[2]).find("core dumped") != std::string::npos);

  CHECK(out[3].kind == ExitedChild::Kind::Signaled);
  CHECK(out[3].signal == SIGKILL);
  CHECK_FALSE(out[3].core);

  // A pid the caller does not know is still collected: the caller decides what it means.
  CHECK(out[4].pid == 99999);
  CHECK(describe(out[4]) == "exited with code 1");
}

TEST_CASE("reaper: stops at 0 (none exited yet) and retries EINTR") {
  int calls = 0;
  Reaper r([&](int* status) -> pid_t {
    switch (calls++) {
    case 0:
      errno = EINTR;
      return -1;
    case 1:
      *status = W_EXITCODE(0, 0);
      return 42;
    default:
      return 0;
    }
  });
  std::vector<ExitedChild> out = r.reap();
  REQUIRE(out.size() == 1);
  CHECK(out[0].pid == 42);
  CHECK(calls == 3);
}
