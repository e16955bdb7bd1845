#include "fcgi_host/worker/slow_handler_watch.hpp"

#include "process_manager/signals.hpp"

#include <pthread.h>
#include <signal.h>

namespace fcgi_host {
namespace {

sigset_t nudge_set() {
  sigset_t nudge;
  sigemptyset(&nudge);
  sigaddset(&nudge, process_manager::signals::nudge_signal());
  return nudge;
}

} // namespace

void SlowHandlerWatch::start(std::function<void(std::uint64_t)> on_nudge) {
  on_nudge_ = std::move(on_nudge);
  sigset_t nudge = nudge_set();
  pthread_sigmask(SIG_BLOCK, &nudge, nullptr);
  thread_ = std::thread([this] { wait_for_nudges(); });
}

void SlowHandlerWatch::stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(table_mutex_);
    quit_ = true;
  }
  pthread_kill(thread_.native_handle(), process_manager::signals::nudge_signal());
  thread_.join();
}

void SlowHandlerWatch::wait_for_nudges() {
  sigset_t nudge = nudge_set();
  for (;;) {
    siginfo_t info;
    if (sigwaitinfo(&nudge, &info) < 0) continue;
    std::lock_guard lock(table_mutex_);
    if (quit_) return;
    const bool queued = info.si_code == SI_QUEUE; // the master's, naming the request
    if (in_handler_)
      on_nudge_(queued ? reinterpret_cast<std::uintptr_t>(info.si_value.sival_ptr) : 0);
  }
}

} // namespace fcgi_host
