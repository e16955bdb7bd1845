#include "fcgi_host/pools/upgrade.hpp"

#include "fcgi_host/config/exec_env.hpp"
#include "fcgi_host/net/systemd_socket.hpp"
#include "fcgi_host/sys_error.hpp"
#include "process_manager/argv.hpp"
#include "process_manager/fork_clean.hpp"
#include "process_manager/signal_pipe.hpp"

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fcgi_host {
namespace {

constexpr std::string_view kPoolKey = "pool=";
constexpr std::size_t kMaxOutput = 64 * 1024;

std::string last_line(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == ' '))
    text.pop_back();
  const std::size_t at = text.rfind('\n');
  return at == std::string::npos ? text : text.substr(at + 1);
}

// The output of `fd` until EOF or `deadline`; false on the deadline.
bool read_until_eof(int fd, std::string& out, std::chrono::steady_clock::time_point deadline) {
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) < 0 && errno != EINTR) return false;
    char buf[4096];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) return true;
    if (n < 0 && errno != EINTR && errno != EAGAIN) return true;
    if (n > 0 && out.size() < kMaxOutput) out.append(buf, static_cast<std::size_t>(n));
  }
}

std::string describe_status(int status) {
  if (WIFEXITED(status)) return "exited with code " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "ended";
}

bool keep_across_exec(int fd, bool keep) {
  return fd < 0 || ::fcntl(fd, F_SETFD, keep ? 0 : FD_CLOEXEC) == 0;
}

// NAME:PID:STATE:SOCKET
std::optional<PoolsHandover::Pool> parse_pool(std::string_view text) {
  std::vector<std::string> parts;
  for (std::size_t at = 0;;) {
    const std::size_t end = text.find(':', at);
    parts.emplace_back(text.substr(at, end == std::string_view::npos ? end : end - at));
    if (end == std::string_view::npos) break;
    at = end + 1;
  }
  if (parts.size() != 4 || parts[0].empty() || parts[2].size() != 1) return std::nullopt;
  char* stop = nullptr;
  const long pid = std::strtol(parts[1].c_str(), &stop, 10);
  const char state = parts[2][0];
  if (parts[1].empty() || *stop != '\0' || pid <= 0 ||
      (state != 'R' && state != 'S' && state != 'X'))
    return std::nullopt;
  return PoolsHandover::Pool{parts[0], static_cast<pid_t>(pid), state, parts[3]};
}

} // namespace

std::string fingerprint(std::string_view text) {
  std::uint64_t h = 14695981039346656037ull;
  for (unsigned char c : text)
    h = (h ^ c) * 1099511628211ull;
  char out[17];
  for (int i = 15; i >= 0; --i, h >>= 4)
    out[i] = "0123456789abcdef"[h & 15];
  out[16] = '\0';
  return out;
}

std::optional<std::string> PoolsHandover::to_text() const {
  if (status_dir.find(';') != std::string::npos || cgroup.find(';') != std::string::npos)
    return std::nullopt;
  std::string text = "status_dir=" + status_dir + ";cgroup=" + cgroup;
  for (const Pool& p : pools)
    text += ";" + std::string(kPoolKey) + p.name + ":" + std::to_string(p.pid) + ":" + p.state +
            ":" + p.socket;
  return text;
}

std::optional<PoolsHandover> PoolsHandover::from_text(std::string_view text) {
  PoolsHandover h;
  while (!text.empty()) {
    const std::size_t end = std::min(text.find(';'), text.size());
    const std::string_view item = text.substr(0, end);
    text.remove_prefix(std::min(end + 1, text.size()));
    if (item.starts_with("status_dir=")) {
      h.status_dir = item.substr(11);
    } else if (item.starts_with("cgroup=")) {
      h.cgroup = item.substr(7);
    } else if (item.starts_with(kPoolKey)) {
      std::optional<Pool> pool = parse_pool(item.substr(kPoolKey.size()));
      if (!pool) return std::nullopt;
      h.pools.push_back(std::move(*pool));
    } else {
      return std::nullopt;
    }
  }
  return h;
}

std::string check_new_binary(const std::string& executable, const std::vector<std::string>& args,
                             std::chrono::milliseconds timeout) {
  std::vector<std::string> words = args;
  words.push_back("--test-config");
  process_manager::Argv argv(std::move(words));
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) return sys_error("pipe2", "");
  const pid_t parent = ::getpid();
  const pid_t pid = process_manager::fork_clean([&](const sigset_t&) {
    sigset_t none; // the supervisor blocks signals for its pipe: the check starts with none
    sigemptyset(&none);
    process_manager::restore_signal_mask(none);
    ::dup2(out[1], 1);
    ::dup2(out[1], 2);
    ::setenv(exec_env::kCheckedFor, std::to_string(parent).c_str(), 1);
    ::execv(executable.c_str(), argv.data());
    const std::string why = sys_error("execv", executable) + "\n";
    [[maybe_unused]] ssize_t n = ::write(2, why.data(), why.size());
  });
  ::close(out[1]);
  if (pid < 0) {
    ::close(out[0]);
    return sys_error("fork", "");
  }
  std::string output;
  const bool ended = read_until_eof(out[0], output, std::chrono::steady_clock::now() + timeout);
  ::close(out[0]);
  if (!ended) ::kill(pid, SIGKILL);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  if (!ended)
    return "`" + executable + " --test-config` did not finish within " +
           std::to_string(timeout.count() / 1000) + " s";
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return "";
  const std::string line = last_line(output);
  return "`" + executable + " --test-config` " + describe_status(status) +
         (line.empty() ? "" : ": " + line);
}

std::string exec_in_place(const std::string& executable, const std::vector<std::string>& args,
                          const PoolsHandover& handover, const ExecFds& fds) {
  const std::optional<std::string> text = handover.to_text();
  if (!text) return "a path to hand over holds ';'";
  process_manager::Argv argv(args);
  // The control signals wait, blocked, until the new image routes them (the mask survives
  // exec): a TERM in between must not kill the master with its default action.
  sigset_t control, saved;
  sigemptyset(&control);
  for (int sig : {SIGTERM, SIGQUIT, SIGINT, SIGHUP, SIGUSR1, SIGUSR2, SIGTTIN, SIGTTOU, SIGCHLD})
    sigaddset(&control, sig);
  ::sigprocmask(SIG_BLOCK, &control, &saved);
  ::setenv(exec_env::kPoolsHandover, text->c_str(), 1);
  if (fds.pidfile >= 0) ::setenv(exec_env::kPidfileFd, std::to_string(fds.pidfile).c_str(), 1);
  if (fds.status >= 0) {
    ::setenv(exec_env::kStatusFd, std::to_string(fds.status).c_str(), 1);
    ::setenv(exec_env::kStatusFile, fds.status_file.c_str(), 1);
  }
  if (fds.systemd_socket) pass_systemd_socket();
  std::string why;
  if (!keep_across_exec(fds.pidfile, true) || !keep_across_exec(fds.status, true) ||
      (fds.systemd_socket && !keep_across_exec(kSystemdFirstFd, true)))
    why = sys_error("fcntl(FD_CLOEXEC off)", "pidfile, status socket or systemd's socket");
  else
    ::execv(executable.c_str(), argv.data());
  if (why.empty()) why = sys_error("execv", executable);
  keep_across_exec(fds.pidfile, false);
  keep_across_exec(fds.status, false);
  if (fds.systemd_socket) keep_across_exec(kSystemdFirstFd, false);
  for (const char* name :
       {exec_env::kPoolsHandover, exec_env::kPidfileFd, exec_env::kStatusFd, exec_env::kStatusFile})
    ::unsetenv(name);
  forget_systemd_sockets();
  ::sigprocmask(SIG_SETMASK, &saved, nullptr);
  return why;
}

} // namespace fcgi_host
