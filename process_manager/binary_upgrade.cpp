#include "process_manager/binary_upgrade.hpp"

#include "process_manager/fork_clean.hpp"
#include "process_manager/log.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>
#include <utility>

namespace process_manager {

std::optional<std::string> why_not_upgrade(bool supported, bool in_progress, State state) {
  if (!supported) return "USR2: binary upgrade not supported by this program";
  if (in_progress) return "USR2 ignored: an upgrade is in progress";
  if (state != State::Running) return std::string("USR2 ignored: ") + to_string(state);
  return std::nullopt;
}

UpgradeOutcome ready_outcome(ssize_t n, int error) {
  if (n < 0 && (error == EINTR || error == EAGAIN)) return UpgradeOutcome::Pending;
  return n == 1 ? UpgradeOutcome::Ready : UpgradeOutcome::Failed;
}

UpgradeChild::~UpgradeChild() {
  if (fd_ >= 0) ::close(fd_);
}

bool UpgradeChild::start(SignalPipe& signals, const std::function<void(int)>& exec) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) == -1) {
    PM_LOG(LogLevel::Error, std::string("USR2: pipe2() failed: ") + std::strerror(errno));
    return false;
  }
  pid_t pid = fork_clean([&](const sigset_t& mask) { // the new master-to-be, then exec
    signals.close_in_child();
    restore_signal_mask(mask);
    ::close(fds[0]);
    ::fcntl(fds[1], F_SETFD, 0); // the one fd besides the listen socket that crosses exec
    exec(fds[1]);
  });
  int fork_errno = errno;
  ::close(fds[1]);
  if (pid == -1) {
    ::close(fds[0]);
    PM_LOG(LogLevel::Error, std::string("USR2: fork() failed: ") + std::strerror(fork_errno));
    return false;
  }
  pid_ = pid;
  fd_ = fds[0];
  PM_LOG(LogLevel::Notice, "USR2: binary upgrade: new master " + std::to_string(pid) + " starting");
  return true;
}

UpgradeOutcome UpgradeChild::on_readable() {
  char byte;
  ssize_t n = ::read(fd_, &byte, 1);
  UpgradeOutcome outcome = ready_outcome(n, errno);
  if (outcome == UpgradeOutcome::Pending) return outcome;
  ::close(std::exchange(fd_, -1));
  pid_ = -1;
  return outcome;
}

void write_ready_byte(int& fd) {
  if (fd < 0) return;
  [[maybe_unused]] ssize_t n = ::write(fd, "R", 1);
  ::close(std::exchange(fd, -1));
}

} // namespace process_manager
