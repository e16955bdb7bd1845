#pragma once
// Log lines that clients or the kernel can trigger (a malformed request, a refused connection,
// EMFILE on accept): a flood of them must not fill the disk nor drown the lines that matter.
// Each kind of line has a bucket of kBurst lines that refills by one every kRefillNs; a line
// that finds the bucket empty is counted, and the count is written a second after the first
// such line (five seconds while the flood goes on). A flood that lasts a minute writes about
// two dozen lines, however fast or even it is.
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
  static constexpr unsigned kBurst = 10;
  static constexpr std::uint64_t kRefillNs = 6'000'000'000;
  static constexpr std::uint64_t kFirstCountNs = 1'000'000'000;
  static constexpr std::uint64_t kNextCountNs = 5'000'000'000;
  struct Bucket {
    bool started = false;
    unsigned tokens = kBurst;
    std::uint64_t refilled_ns = 0;
    unsigned long suppressed = 0;
    std::uint64_t count_due_ns = 0;  // when to write `suppressed` (0: nothing held)
    std::uint64_t last_count_ns = 0; // when the last count was written
  };
  std::array<Bucket, static_cast<std::size_t>(Kind::Count)> buckets_{};
};

} // namespace fcgi_host
