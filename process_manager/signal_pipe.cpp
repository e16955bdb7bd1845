#include "process_manager/signal_pipe.hpp"

#include <cerrno>
#include <fcntl.h>
#include <poll.h>
#include <system_error>
#include <unistd.h>

namespace process_manager {

namespace {

// The handler cannot reach an object: the write end lives here while installed.
volatile sig_atomic_t g_write_fd = -1;

extern "C" void on_signal(int sig) {
  int saved_errno = errno;
  unsigned char byte = static_cast<unsigned char>(sig);
  // A full pipe drops the byte: harmless, since the loop reaps and re-checks on every tick.
  [[maybe_unused]] ssize_t n = ::write(g_write_fd, &byte, 1);
  errno = saved_errno;
}

[[noreturn]] void fail(const char* call) {
  throw std::system_error(errno, std::generic_category(), std::string(call) + " failed");
}

} // namespace

SignalPipe::SignalPipe() {
  int fds[2];
  if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) == -1) fail("pipe2(signal pipe)");
  read_fd_ = fds[0];
  write_fd_ = fds[1];
}

SignalPipe::~SignalPipe() {
  for (auto& [sig, old] : saved_)
    sigaction(sig, &old, nullptr);
  if (!saved_.empty()) g_write_fd = -1;
  if (read_fd_ != -1) ::close(read_fd_);
  if (write_fd_ != -1) ::close(write_fd_);
}

void SignalPipe::install(std::span<const int> signals) {
  g_write_fd = write_fd_;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  // SA_RESTART keeps the master's other system calls simple; poll() in wait() is never
  // restarted, so a signal still wakes the loop at once.
  sa.sa_flags = SA_RESTART;
  sigfillset(&sa.sa_mask);
  sigset_t routed;
  sigemptyset(&routed);
  for (int sig : signals) {
    struct sigaction old {};
    if (sigaction(sig, &sa, &old) == -1) fail("sigaction()");
    saved_.emplace_back(sig, old);
    sigaddset(&routed, sig);
  }
  // A program may block these signals until the pipe is ready (fcgi-host does, from its first
  // line, so that a HUP or USR1 arriving during start-up is not fatal): from here they wake the
  // loop, and one that arrived meanwhile is delivered now.
  sigprocmask(SIG_UNBLOCK, &routed, nullptr);
}

std::vector<int> SignalPipe::wait(std::chrono::milliseconds timeout, std::span<const int> watch,
                                  std::vector<int>* ready) {
  std::vector<pollfd> fds{{read_fd_, POLLIN, 0}};
  for (int fd : watch)
    fds.push_back({fd, POLLIN, 0});
  std::vector<int> received;
  if (ready) ready->clear();
  if (poll(fds.data(), fds.size(), static_cast<int>(timeout.count())) <= 0)
    return received; // tick or EINTR
  for (std::size_t i = 1; i < fds.size(); ++i)
    if (ready && (fds[i].revents & (POLLIN | POLLERR | POLLHUP))) ready->push_back(fds[i].fd);
  if (!(fds[0].revents & POLLIN)) return received;
  unsigned char buf[64];
  for (;;) {
    ssize_t n = ::read(read_fd_, buf, sizeof buf);
    if (n > 0) {
      received.insert(received.end(), buf, buf + n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return received; // EAGAIN: drained
  }
}

void SignalPipe::close_in_child() {
  ::close(read_fd_);
  ::close(write_fd_);
  read_fd_ = write_fd_ = -1;
  saved_.clear();
}

sigset_t block_all_signals() {
  sigset_t all, saved;
  sigfillset(&all);
  sigprocmask(SIG_SETMASK, &all, &saved);
  return saved;
}

void restore_signal_mask(const sigset_t& saved) {
  sigprocmask(SIG_SETMASK, &saved, nullptr);
}

void reset_signal_dispositions() {
  struct sigaction sa {};
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  // KILL and STOP cannot be changed, and glibc reserves two real-time signals for itself:
  // sigaction() refuses those with EINVAL, which is fine.
  for (int sig = 1; sig < NSIG; ++sig)
    sigaction(sig, &sa, nullptr);
}

} // namespace process_manager
