#pragma once
// Log lines that clients or the kernel can trigger (a malformed request, a refused connection,
// EMFILE on accept): a flood of them must not fill the disk nor drown the lines that matter.
// Each kind of line has its own window: a burst of lines, then one line that counts what was
// held back. While a kind keeps flooding, its windows double (1 s, 2 s, 4 s … 1 min) and hold
// back every line but the count: a flood that lasts a minute writes about a dozen lines.
#include <array>
#include <cstdint>
#include <string>

namespace fcgi_host {

class ClientErrorLog {
public:
  enum class Kind { Request, Connection, Accept, Handler, Count };

  void write(Kind kind, const std::string& line);
  // When the next count of held-back lines is due (0: none held). The worker wakes up for it,
  // so the count is written even if no further error comes.
  std::uint64_t due_ns() const;
  // Writes the counts that are due.
  void flush_due(std::uint64_t now_ns);

private:
  static constexpr std::uint64_t kFirstWindowNs = 1'000'000'000;
  static constexpr std::uint64_t kLongestWindowNs = 60'000'000'000;
  static constexpr unsigned kBurst = 10;
  struct Window {
    std::uint64_t start_ns = 0;
    std::uint64_t length_ns = kFirstWindowNs;
    unsigned lines = 0;
    unsigned long suppressed = 0;
    bool flooding = false; // the last window held lines back: this one writes only the count
    std::uint64_t end_ns() const { return start_ns + length_ns; }
  };
  void next_window(Window& w, std::uint64_t now_ns);
  std::array<Window, static_cast<std::size_t>(Kind::Count)> windows_{};
};

} // namespace fcgi_host
