#include "fcgi_host/worker/stream_heartbeat.hpp"

#include "fcgi_host/net/socket_write.hpp"
#include "fcgi_host/protocol/records.hpp"
#include "fcgi_host/worker/request_lane.hpp"
#include "process_manager/clock.hpp"
#include "process_manager/crash_report.hpp"

#include <chrono>
#include <csignal>
#include <pthread.h>
#include <string_view>

namespace fcgi_host {
namespace {

constexpr int kHeartbeatWriteMs = 1000; // a client that takes no heartbeat in a second: skipped

} // namespace

StreamHeartbeat::~StreamHeartbeat() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(lane_.mutex);
    quit_ = true;
  }
  lane_.changed.notify_all();
  thread_.join();
}

void StreamHeartbeat::stream_began() {
  if (!thread_.joinable()) {
    // Every signal blocked but the fatal ones, as in the handler threads: the loop's signalfd
    // and the slow-handler watch take the worker's signals; a fault still reports its crash.
    sigset_t all, saved;
    sigfillset(&all);
    for (int sig = 1; sig < NSIG; ++sig)
      if (process_manager::is_fatal_signal(sig)) sigdelset(&all, sig);
    pthread_sigmask(SIG_BLOCK, &all, &saved);
    thread_ = std::thread([this] { run(); });
    pthread_sigmask(SIG_SETMASK, &saved, nullptr);
  }
  lane_.changed.notify_all();
}

void StreamHeartbeat::run() {
  std::unique_lock lock(lane_.mutex);
  while (!quit_) {
    if (!lane_.event_stream) {
      lane_.changed.wait(lock);
      continue;
    }
    const std::uint64_t now = process_manager::monotonic_ns();
    const std::uint64_t due = lane_.last_output_ns + every_ns_;
    if (now < due) {
      lane_.changed.wait_for(lock, std::chrono::nanoseconds(due - now));
      continue;
    }
    lane_.last_output_ns = now;
    if (!lane_.between_events || lane_.client_gone) continue; // inside an event: the next turn
    std::string record;
    records::append_record(record, records::Type::Stdout, lane_.request_id, kHeartbeatComment);
    if (!write_all(lane_.fd, record.data(), record.size(), kHeartbeatWriteMs))
      lane_.client_gone = true; // the handler's next write fails as well
  }
}

} // namespace fcgi_host
