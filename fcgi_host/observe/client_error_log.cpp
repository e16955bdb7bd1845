#include "fcgi_host/observe/client_error_log.hpp"

#include "process_manager/clock.hpp"

namespace fcgi_host {

using process_manager::LogLevel;

// A failing handler is a 500 the application owes: `error`, the level an operator greps for.
// What clients or the kernel cause is a `warn`: the host answered it as it should.
void ClientErrorLog::write(Kind kind, const std::string& line) {
  kinds_[static_cast<std::size_t>(kind)].write(kind == Kind::Handler ? LogLevel::Error
                                                                     : LogLevel::Warn,
                                               line, process_manager::monotonic_ns());
}

std::uint64_t ClientErrorLog::due_ns() const {
  std::uint64_t due = 0;
  for (const process_manager::RateLimitedLog& k : kinds_)
    if (std::uint64_t d = k.due_ns(); d && (due == 0 || d < due)) due = d;
  return due;
}

void ClientErrorLog::flush_due(std::uint64_t now_ns) {
  for (process_manager::RateLimitedLog& k : kinds_)
    k.flush_due(now_ns, LogLevel::Warn, "client errors");
}

} // namespace fcgi_host
