#include "process_manager/stack_trace.hpp"

#include "process_manager/argv.hpp"
#include "process_manager/clock.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

extern char** environ;

namespace process_manager {

namespace {

// eu-stack first: it attaches, unwinds and detaches in tens of milliseconds; gdb loads every
// symbol table first and may need most of the budget.
// -i -s: inlined frames and source lines, from debug info where it is installed; -n: a runaway
// recursion is not a thousand lines. -1 -p TID: that thread alone (eu-stack attaches to the
// thread group of any of its threads).
std::vector<std::string> debugger_argv(pid_t pid, pid_t tid) {
  std::string p = std::to_string(pid);
  if (access("/usr/bin/eu-stack", X_OK) == 0) {
    if (tid != 0)
      return {"/usr/bin/eu-stack", "-1", "-i", "-s", "-n", "64", "-p", std::to_string(tid)};
    return {"/usr/bin/eu-stack", "-i", "-s", "-n", "64", "-p", p};
  }
  if (access("/usr/bin/gdb", X_OK) == 0)
    return {"/usr/bin/gdb", "-nx", "-batch", "-p", p, "-ex", "bt"};
  return {};
}

// Only the frames and their source lines (indented, after a frame), and the thread headers of a
// stack of several threads ("TID n:", eu-stack's; "Thread n (...)", gdb's), so that a reader
// can tell which stack is which thread's: both debuggers also print banners.
std::string frames(const std::string& out) {
  std::istringstream in(out);
  std::string result;
  bool in_frame = false;
  for (std::string line; std::getline(in, line);) {
    bool source = in_frame && line.starts_with("    ");
    in_frame = line.starts_with("#") || source;
    if (in_frame || line.starts_with("TID ") || line.starts_with("Thread ")) result += line + "\n";
  }
  return result;
}

} // namespace

bool is_thread_of(pid_t pid, pid_t tid) {
  if (pid <= 0 || tid <= 0) return false;
  if (tid == pid) return true;
  struct stat st {};
  const std::string task = "/proc/" + std::to_string(pid) + "/task/" + std::to_string(tid);
  return ::stat(task.c_str(), &st) == 0;
}

std::string capture_stack(pid_t pid, std::chrono::milliseconds budget, pid_t tid) {
  // `pid` is the master's own (its worker table); `tid` may come from the worker's slot, which
  // the worker can write: a debugger attaches to the whole thread group of any tid, so a tid
  // that is not one of this process's threads would have the master trace a process of the
  // worker's choosing. Such a tid is ignored: the whole process's stack instead.
  if (tid != 0 && !is_thread_of(pid, tid)) tid = 0;
  std::vector<std::string> args = debugger_argv(pid, tid);
  if (args.empty()) return "no stack trace: no debugger installed (eu-stack or gdb)\n";
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) == -1)
    return std::string("no stack trace: pipe2() failed: ") + std::strerror(errno) + "\n";

  // posix_spawn: no fork of the master's memory, default dispositions and an empty mask in the
  // child, its own process group so that a timed-out debugger is killed with its helpers.
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t all, none;
  sigfillset(&all);
  sigemptyset(&none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETPGROUP);
  Argv argv(args);
  pid_t child = -1;
  int rc = posix_spawn(&child, argv.data()[0], &fa, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    return "no stack trace: posix_spawn(" + args[0] + ") failed: " + std::strerror(rc) + "\n";
  }

  std::string out;
  bool timed_out = false;
  std::uint64_t deadline = monotonic_ns() + ns(budget);
  for (;;) {
    std::uint64_t now = monotonic_ns();
    if (now >= deadline) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int n = poll(&p, 1, static_cast<int>((deadline - now) / 1'000'000 + 1));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) continue; // the deadline check above ends it
    char buf[4096];
    ssize_t got = ::read(fds[0], buf, sizeof buf);
    if (got > 0) {
      if (out.size() < (64u << 10)) out.append(buf, static_cast<std::size_t>(got));
      continue;
    }
    if (got < 0 && errno == EINTR) continue;
    break; // EOF: the debugger is done
  }
  ::close(fds[0]);
  if (timed_out) ::kill(-child, SIGKILL);
  // Reaped here, by pid, so that the master's reap() never sees it.
  while (::waitpid(child, nullptr, 0) == -1 && errno == EINTR) {}
  std::string f = frames(out);
  if (timed_out)
    f += "(" + args[0] + " timed out after " + std::to_string(budget.count()) + " ms)\n";
  if (f.empty()) f = "no stack trace: " + args[0] + " printed no frames\n";
  return f;
}

} // namespace process_manager
