#pragma once
// Lines about misbehaving clients, in a worker or the master's status server: a flood must not
// fill the disk.
#include "process_manager/clock.hpp"
#include "process_manager/log.hpp"

#include <cstdint>
#include <string>

namespace fcgi_host {

// At most 10 lines a second; the count of those held back follows.
class ClientErrorLog {
public:
  void write(const std::string& line) {
    std::uint64_t now = process_manager::monotonic_ns();
    if (now - window_start_ > kWindowNs) {
      flush();
      window_start_ = now;
      lines_ = 0;
    }
    if (++lines_ <= 10)
      PM_LOG(process_manager::LogLevel::Warn, line);
    else
      ++suppressed_;
  }
  // When the count of lines held back is due (0: none held): the worker wakes up for it, so the
  // count is written even if no further error comes.
  std::uint64_t due_ns() const { return suppressed_ ? window_start_ + kWindowNs : 0; }
  void flush() {
    if (suppressed_)
      PM_LOG(process_manager::LogLevel::Warn,
             std::to_string(suppressed_) + " more client errors not logged");
    suppressed_ = 0;
  }

private:
  static constexpr std::uint64_t kWindowNs = 1'000'000'000;
  std::uint64_t window_start_ = 0;
  unsigned lines_ = 0, suppressed_ = 0;
};

} // namespace fcgi_host
