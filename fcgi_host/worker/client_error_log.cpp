#include "fcgi_host/worker/client_error_log.hpp"

#include "process_manager/clock.hpp"
#include "process_manager/log.hpp"

#include <algorithm>

namespace fcgi_host {

using process_manager::LogLevel;

void ClientErrorLog::write(Kind kind, const std::string& line) {
  Window& w = windows_[static_cast<std::size_t>(kind)];
  std::uint64_t now = process_manager::monotonic_ns();
  if (w.start_ns == 0 || now >= w.end_ns()) next_window(w, now);
  if (!w.flooding && ++w.lines <= kBurst)
    PM_LOG(LogLevel::Warn, line);
  else
    ++w.suppressed;
}

std::uint64_t ClientErrorLog::due_ns() const {
  std::uint64_t due = 0;
  for (const Window& w : windows_)
    if (w.suppressed && (due == 0 || w.end_ns() < due)) due = w.end_ns();
  return due;
}

void ClientErrorLog::flush_due(std::uint64_t now_ns) {
  for (Window& w : windows_)
    if (w.suppressed && now_ns >= w.end_ns()) next_window(w, now_ns);
}

// Ends the window: the count of what it held back, and a longer window while the flood goes on.
void ClientErrorLog::next_window(Window& w, std::uint64_t now_ns) {
  if (w.suppressed || w.lines >= kBurst) { // the burst was used up: a flood, however even
    if (w.suppressed)
      PM_LOG(LogLevel::Warn, std::to_string(w.suppressed) + " more client errors not logged");
    w.length_ns = w.flooding ? std::min(w.length_ns * 2, kLongestWindowNs) : kFirstWindowNs;
    w.flooding = true;
  } else {
    w.length_ns = kFirstWindowNs;
    w.flooding = false;
  }
  w.suppressed = 0;
  w.lines = 0;
  w.start_ns = now_ns;
}

} // namespace fcgi_host
