#include "fcgi_host/worker/worker_signals.hpp"

#include <array>
#include <csignal>
#include <pthread.h>
#include <sys/signalfd.h>
#include <unistd.h>

namespace fcgi_host {
namespace {

// What a worker acts on: TERM, QUIT, USR1. The master's own signals are ignored here.
constexpr std::array kTaken{SIGTERM, SIGQUIT, SIGUSR1};
constexpr std::array kMasterOnly{SIGHUP, SIGTTIN, SIGTTOU, SIGUSR2};

} // namespace

WorkerSignals::~WorkerSignals() {
  if (fd_ >= 0) ::close(fd_);
}

bool WorkerSignals::open(const char*& failed_call) {
  std::signal(SIGPIPE, SIG_IGN);
  for (int master_only : kMasterOnly)
    std::signal(master_only, SIG_IGN);
  sigemptyset(&set_);
  for (int s : kTaken)
    sigaddset(&set_, s);
  if (pthread_sigmask(SIG_BLOCK, &set_, nullptr) != 0) {
    failed_call = "pthread_sigmask";
    return false;
  }
  fd_ = signalfd(-1, &set_, SFD_NONBLOCK | SFD_CLOEXEC);
  if (fd_ < 0) {
    failed_call = "signalfd";
    return false;
  }
  return true;
}

int WorkerSignals::take() {
  signalfd_siginfo info;
  if (::read(fd_, &info, sizeof info) != sizeof info) return 0;
  return static_cast<int>(info.ssi_signo);
}

bool WorkerSignals::pending() const {
  sigset_t pending;
  if (sigpending(&pending) != 0) return false;
  for (int s : kTaken)
    if (sigismember(&pending, s) == 1) return true;
  return false;
}

} // namespace fcgi_host
