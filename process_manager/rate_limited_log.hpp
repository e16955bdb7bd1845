#pragma once
// Lines that clients, the kernel or a flood can trigger must not fill the disk nor drown the lines
// that matter. A RateLimitedLog is a bucket of `burst` lines that refills by one every `refill`;
// a line that finds it empty is held back and counted, and the count is written once it is due:
// `first_count` after the first held line, `next_count` while the flood goes on. A flood that
// lasts a minute writes about two dozen lines, however fast or even it is.
//
// The owner reads the clock (monotonic_ns) and wakes up for due_ns(), so that the count is
// written even if no further line comes; an owner without such a timer reports take_held() in
// its next line instead.
#include "process_manager/log.hpp"

#include <cstdint>
#include <string_view>

namespace process_manager {

class RateLimitedLog {
public:
  struct Rate {
    unsigned burst = 10;
    std::uint64_t refill_ns = 6'000'000'000;
    std::uint64_t first_count_ns = 1'000'000'000;
    std::uint64_t next_count_ns = 5'000'000'000;
  };

  RateLimitedLog() = default;
  explicit RateLimitedLog(Rate rate) : rate_(rate), tokens_(rate.burst) {}

  // True when a line may be written now (it takes a token); false when it is held back.
  bool allow(std::uint64_t now_ns);
  // Whether allow(now_ns) would say true, taking nothing: for work worth doing only for a line
  // that will be written (a crashed worker's stack).
  bool would_allow(std::uint64_t now_ns) const {
    return rate_.refill_ns == 0 || !started_ || tokens_ > 0 ||
           now_ns - refilled_ns_ >= rate_.refill_ns;
  }
  // Writes `line` at `level` if allowed.
  void write(LogLevel level, std::string_view line, std::uint64_t now_ns) {
    if (allow(now_ns)) PM_LOG(level, std::string(line));
  }

  // When the count of held lines is due (0: none held).
  std::uint64_t due_ns() const { return held_ ? count_due_ns_ : 0; }
  // Writes "<count> more <what> not logged" when it is due. Inline: the owner asks after every
  // wait, and nothing is due nearly always.
  void flush_due(std::uint64_t now_ns, LogLevel level, std::string_view what) {
    if (held_ && now_ns >= count_due_ns_) write_count(now_ns, level, what);
  }
  // The count of held lines once it is due (0 before, or when none are held), and forgets it:
  // for an owner that writes the count in a line of its own.
  unsigned long take_due(std::uint64_t now_ns) {
    if (!held_ || now_ns < count_due_ns_) return 0;
    const unsigned long n = held_;
    held_ = 0;
    count_due_ns_ = 0;
    last_count_ns_ = now_ns;
    return n;
  }
  // How many lines allow(now_ns) would let through one after the other, taking nothing.
  unsigned available(std::uint64_t now_ns) const;
  // The lines held back since the last count, and forgets them (for an owner without a timer).
  unsigned long take_held() {
    unsigned long n = held_;
    held_ = 0;
    return n;
  }

private:
  void write_count(std::uint64_t now_ns, LogLevel level, std::string_view what);

  Rate rate_;
  bool started_ = false;
  unsigned tokens_ = Rate{}.burst;
  std::uint64_t refilled_ns_ = 0;
  unsigned long held_ = 0;
  std::uint64_t count_due_ns_ = 0;  // when to write `held_`
  std::uint64_t last_count_ns_ = 0; // when the last count was written
};

} // namespace process_manager
