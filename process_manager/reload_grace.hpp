#pragma once
// --reload-grace: a reload that makes things worse is undone. After a reload completes, the
// previous generation's configuration is kept for the grace period and the new generation's
// crashes (and boot failures of its replacements) are counted; the kCrashes-th within the grace
// says the new code or config is broken under real traffic, and the master goes back to the
// previous configuration, as a new generation (the old workers have retired by then). Pure: the
// master holds the configuration, this only decides.
#include <chrono>
#include <cstdint>

namespace process_manager {

class ReloadGrace {
public:
  static constexpr unsigned kCrashes = 3;

  // Generation `watched` has just replaced the previous one, at `now_ns`.
  void start(std::uint32_t watched, std::uint64_t now_ns, std::chrono::milliseconds grace) {
    watched_ = watched;
    until_ns_ = now_ns + static_cast<std::uint64_t>(
                             std::chrono::duration_cast<std::chrono::nanoseconds>(grace).count());
    crashes_ = 0;
  }
  // A worker of generation `gen` crashed at `now_ns`. True: go back (once; the grace then ends).
  bool on_crash(std::uint32_t gen, std::uint64_t now_ns) {
    if (!watching(gen, now_ns) || ++crashes_ < kCrashes) return false;
    watched_ = 0;
    return true;
  }
  // Whether crashes of `gen` are still counted.
  bool watching(std::uint32_t gen, std::uint64_t now_ns) const {
    return watched_ != 0 && gen == watched_ && now_ns < until_ns_;
  }
  // The grace has passed (or was never started): the previous configuration can be dropped.
  bool over(std::uint64_t now_ns) const { return watched_ == 0 || now_ns >= until_ns_; }
  void stop() { watched_ = 0; }
  unsigned crashes() const { return crashes_; }

private:
  std::uint32_t watched_ = 0; // 0: not watching
  std::uint64_t until_ns_ = 0;
  unsigned crashes_ = 0;
};

} // namespace process_manager
