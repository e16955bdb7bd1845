#include "fcgi_host/runners/plugin_check.hpp"

#include "fcgi_host/runners/plugin.hpp"
#include "fcgi_host/sys_error.hpp"
#include "process_manager/fork_clean.hpp"
#include "process_manager/signal_pipe.hpp"

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <exception>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fcgi_host {

namespace {

constexpr int kReportFd = 3;

// The child (forked clean): never returns. Its verdict is one message ("" for success) on
// kReportFd.
[[noreturn]] void run_check(const PluginCheck& check, int report, pid_t parent,
                            const sigset_t& mask) {
  if (report != kReportFd) {
    ::dup2(report, kReportFd);
    ::close(report);
  }
  ::close_range(kReportFd + 1, ~0u, 0); // nothing of the master's (sockets, pidfile) is seen
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) == -1 || getppid() != parent) _exit(1);
  process_manager::restore_signal_mask(mask);
  std::string verdict;
  if (!drop_privileges(check.credentials)) {
    verdict = std::string("could not drop privileges to check it: ") + std::strerror(errno);
  } else {
    apply_environment(check.clear_env, check.env);
    try {
      Plugin plugin(check.file, check.shown_as);
    } catch (const std::exception& e) {
      verdict = e.what();
      if (verdict.empty()) verdict = "it failed to load";
    }
  }
  for (std::size_t done = 0; done < verdict.size();) {
    ssize_t n = ::write(kReportFd, verdict.data() + done, verdict.size() - done);
    if (n <= 0) break;
    done += static_cast<std::size_t>(n);
  }
  _exit(verdict.empty() ? 0 : 1);
}

std::string how_it_ended(int status) {
  if (WIFSIGNALED(status))
    return "loading it killed the checking process (signal " + std::to_string(WTERMSIG(status)) +
           ", " + strsignal(WTERMSIG(status)) + ")";
  if (WIFEXITED(status) && WEXITSTATUS(status) != 0)
    return "loading it ended the checking process (exit code " +
           std::to_string(WEXITSTATUS(status)) + ")";
  return "";
}

} // namespace

std::string check_plugin(const PluginCheck& check) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return sys_error("pipe2", "plugin check");
  const pid_t parent = ::getpid();
  const pid_t pid = process_manager::fork_clean([&](const sigset_t& mask) {
    ::close(fds[0]);
    run_check(check, fds[1], parent, mask);
  });
  const int fork_errno = errno;
  ::close(fds[1]);
  if (pid < 0) {
    ::close(fds[0]);
    return sys_error("fork", "plugin check", fork_errno);
  }
  std::string verdict;
  auto deadline =
      std::chrono::steady_clock::now() + std::chrono::milliseconds(kPluginCheckTimeoutMs);
  bool timed_out = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    char buffer[512];
    ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break; // the child is done
    verdict.append(buffer, static_cast<std::size_t>(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  if (timed_out)
    return "loading \"" + check.shown_as + "\" took longer than " +
           std::to_string(kPluginCheckTimeoutMs / 1000) + " s (its constructors?)";
  if (!verdict.empty()) return verdict;
  if (std::string ended = how_it_ended(status); !ended.empty())
    return "\"" + check.shown_as + "\": " + ended;
  return "";
}

} // namespace fcgi_host
