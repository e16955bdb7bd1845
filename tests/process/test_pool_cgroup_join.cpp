// A pool's master joins its cgroup (fcgi_host/pools/cgroups.hpp) the way the master of the
// pools does it: an fd of cgroup.procs opened before the fork, written by the child; and a
// running process moved into one at a reload. Real cgroup v2 files, in a cgroup made under this
// test's own, without controllers (none are needed to place a process); skipped where this
// test's cgroup v2 is not writable.
#include "fcgi_host/pools/cgroups.hpp"
#include "process_manager/cgroup_v2.hpp"
#include "support/skip.hpp"
#include "support/wait.hpp"

#include <doctest/doctest.h>

#include <csignal>
#include <string>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

namespace pm = process_manager;

std::string cgroup_of(pid_t pid) {
  return pm::parse_cgroup2_path(
             pm::read_text_file("/proc/" + std::to_string(pid) + "/cgroup").value_or(""))
      .value_or("");
}

// A child that waits to be killed; reaped by the caller.
pid_t idle_child(int procs_fd = -1) {
  const pid_t pid = fork();
  if (pid == 0) {
    if (procs_fd >= 0 && !fcgi_host::PoolCgroups::join(procs_fd)) _exit(3);
    for (;;)
      pause();
  }
  return pid;
}

void end(pid_t pid) {
  ::kill(pid, SIGKILL);
  ::waitpid(pid, nullptr, 0);
}

} // namespace

TEST_CASE("a child joins a pool cgroup through the fd opened before its fork, or is moved in") {
  std::string why;
  const std::optional<std::string> own = pm::own_cgroup_directory(why);
  if (!own || ::access((*own + "/cgroup.procs").c_str(), W_OK) != 0) {
    return test_support::skip("no writable cgroup v2 here (" +
                              (own ? *own + " not writable" : why) + ")");
  }
  const std::string dir = *own + "/fcgi-host-test-join-" + std::to_string(::getpid());
  if (::mkdir(dir.c_str(), 0755) != 0) {
    return test_support::skip("cannot make a cgroup under " + *own);
  }
  const std::string name = dir.substr(dir.rfind('/'));
  const int fd = fcgi_host::PoolCgroups::open_procs(dir);
  const pid_t joined = idle_child(fd);
  ::close(fd);
  const pid_t moved = idle_child();
  CHECK(test_wait::wait_until([&] { return cgroup_of(joined).ends_with(name); },
                              test_wait::Millis{5000}));
  CHECK_FALSE(cgroup_of(moved).ends_with(name));
  fcgi_host::PoolCgroups::move(moved, dir);
  CHECK(cgroup_of(moved).ends_with(name));
  CHECK_THROWS_AS(fcgi_host::PoolCgroups::open_procs(dir + "/missing"), std::exception);
  end(joined);
  end(moved);
  // Empty once both are reaped: removed (a populated cgroup cannot be).
  CHECK(test_wait::wait_until([&] { return ::rmdir(dir.c_str()) == 0; }, test_wait::Millis{5000}));
}
