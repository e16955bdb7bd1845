#pragma once
// Log lines that clients or the kernel can trigger (a malformed request, a refused connection,
// EMFILE on accept, a failing handler): one rate-limited log (process_manager/rate_limited_log.hpp)
// per kind of line, so that a flood of one kind does not silence the others. The worker and the
// master's status server each keep one.
#include "process_manager/rate_limited_log.hpp"

#include <array>
#include <cstdint>
#include <string>

namespace fcgi_host {

class ClientErrorLog {
public:
  enum class Kind { Request, Connection, Accept, Handler, Count };

  // At `warn`; a Handler line (an exception, a head too large: a 500) at `error`.
  void write(Kind kind, const std::string& line);
  // When the next count of held-back lines is due (0: none held). The worker wakes up for it,
  // so the count is written even if no further error comes.
  std::uint64_t due_ns() const;
  // Writes the counts that are due.
  void flush_due(std::uint64_t now_ns);

private:
  std::array<process_manager::RateLimitedLog, static_cast<std::size_t>(Kind::Count)> kinds_{};
};

} // namespace fcgi_host
