#include "process_manager/generations.hpp"

#include "process_manager/clock.hpp"

#include <utility>

namespace process_manager {

namespace {
// An ondemand pool starts with no worker: the first connection spawns one.
Generation starting(Generation g) {
  if (g.pool.mode == PoolMode::OnDemand) g.pool.workers = 0;
  return g;
}
} // namespace

Generations::Generations(Generation first) : current_(starting(std::move(first))) {}

void Generations::begin(Generation next, std::uint64_t now_ns) {
  previous_ = std::move(current_);
  previous_number_ = current_number_;
  current_ = starting(std::move(next));
  current_number_ = ++last_number_;
  deadline_ns_ = now_ns + ns(current_.pool.graceful_timeout);
}

void Generations::complete(std::uint64_t now_ns) {
  mark_current_ready();
  if (current_.pool.reload_grace.count() > 0 && previous_) { // kept until the grace is over
    fallback_ = std::move(previous_);
    fallback_number_ = previous_number_;
    grace_.start(current_number_, now_ns, current_.pool.reload_grace);
  }
  previous_.reset();
}

void Generations::abandon() {
  current_ = std::move(*previous_);
  current_number_ = previous_number_;
  previous_.reset();
}

bool Generations::crash_undoes_reload(std::uint32_t gen, std::uint64_t now_ns) {
  return fallback_ && grace_.on_crash(gen, now_ns);
}

bool Generations::in_grace(std::uint32_t gen, std::uint64_t now_ns) const {
  return fallback_ && grace_.watching(gen, now_ns);
}

void Generations::end_grace_if_over(std::uint64_t now_ns) {
  if (fallback_ && grace_.over(now_ns)) fallback_.reset(); // the reload held
}

Generations::Undo Generations::go_back(std::uint64_t now_ns) {
  Undo undo{current_number_, fallback_number_};
  grace_.stop();
  Generation back = std::move(*fallback_);
  fallback_.reset();
  begin(std::move(back), now_ns);
  return undo;
}

} // namespace process_manager
