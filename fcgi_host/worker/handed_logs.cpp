#include "fcgi_host/worker/handed_logs.hpp"

#include "fcgi_host/observe/access_log.hpp"
#include "process_manager/log.hpp"
#include "process_manager/log_handover.hpp"

#include <cstddef>

namespace fcgi_host {

namespace {

constexpr std::size_t kErrorLog = 0;
constexpr std::size_t kAccessLog = 1;

} // namespace

std::vector<int> logs_to_hand() {
  std::vector<int> fds(2, -1);
  fds[kErrorLog] = process_manager::Log::get().file_fd();
  fds[kAccessLog] = AccessLog::get().fd();
  return fds;
}

void take_handed_logs(int channel) {
  if (channel < 0) {
    process_manager::Log::get().reopen();
    AccessLog::get().reopen();
    return;
  }
  process_manager::HandedLogs handed;
  if (!handed.receive(channel)) return; // nothing new: the master had nothing to hand
  process_manager::Log::get().adopt(handed.take(kErrorLog));
  AccessLog::get().adopt(handed.take(kAccessLog));
}

} // namespace fcgi_host
