#include "process_manager/pool_sizing.hpp"

#include "process_manager/clock.hpp"

#include <algorithm>

namespace process_manager {

IdleWatch watch_idle(IdleWatch was, WorkerState state, std::uint64_t requests,
                     std::uint64_t now_ns) {
  IdleWatch now{was.idle_since_ns, requests};
  if (state == WorkerState::Starting) return now;
  if (!is_waiting(state))
    now.idle_since_ns = 0;
  else if (was.idle_since_ns == 0 || requests != was.requests_seen)
    now.idle_since_ns = now_ns;
  return now;
}

namespace {

struct Census {
  int active = 0, idle = 0, starting = 0;
  const PoolMember* idlest = nullptr; // idle longest; the first of equals
};

Census count(const std::vector<PoolMember>& members) {
  Census c;
  for (const PoolMember& m : members) {
    ++c.active;
    if (m.state == WorkerState::Starting) {
      ++c.starting;
    } else if (is_waiting(m.state)) {
      ++c.idle;
      if (!c.idlest || m.idle_since_ns < c.idlest->idle_since_ns) c.idlest = &m;
    }
  }
  return c;
}

ScaleDecision scale_dynamic(const PoolSettings& p, const Census& c, int max) {
  ScaleDecision d{p.workers, {}};
  if (c.idle + c.starting < p.min_spare && c.active < max) {
    d.workers = std::min(max, std::max(p.workers, c.active + p.min_spare - c.idle - c.starting));
  } else if (c.idle > p.max_spare && c.idlest) { // one per turn, the one idle longest
    d.retire.push_back(c.idlest->pid);
    d.workers = c.active - 1;
  }
  return d;
}

ScaleDecision scale_on_demand(const PoolSettings& p, const std::vector<PoolMember>& members,
                              const Census& c, int max, bool queued, std::uint64_t now) {
  ScaleDecision d{p.workers, {}};
  if (queued && c.idle == 0 && c.starting == 0 && c.active < max) d.workers = c.active + 1;
  for (const PoolMember& m : members)
    if (m.idle_since_ns != 0 && now - m.idle_since_ns > ns(p.idle_timeout) && is_waiting(m.state)) {
      d.retire.push_back(m.pid);
      d.workers = std::max(0, d.workers - 1);
    }
  return d;
}

} // namespace

ScaleDecision scale_pool(const PoolSettings& pool, const std::vector<PoolMember>& members,
                         bool connection_queued, std::uint64_t now_ns) {
  if (pool.mode == PoolMode::Static) return ScaleDecision{pool.workers, {}};
  Census c = count(members);
  int max = pool.max_workers > 0 ? pool.max_workers : std::max(pool.workers, 1);
  if (pool.mode == PoolMode::Dynamic) return scale_dynamic(pool, c, max);
  return scale_on_demand(pool, members, c, max, connection_queued, now_ns);
}

FitDecision fit_to_target(int workers, std::size_t held, const std::vector<PoolMember>& members) {
  FitDecision d;
  const std::size_t target = static_cast<std::size_t>(std::max(workers, 0));
  std::size_t active = members.size() + held;
  for (; active > target && d.release_held < held; --active)
    ++d.release_held;
  std::vector<const PoolMember*> newest_first;
  for (const PoolMember& m : members)
    newest_first.push_back(&m);
  std::stable_sort(
      newest_first.begin(), newest_first.end(),
      [](const PoolMember* a, const PoolMember* b) { return a->started_at_ns > b->started_at_ns; });
  for (std::size_t i = 0; active > target && i < newest_first.size(); --active, ++i)
    d.retire.push_back(newest_first[i]->pid);
  d.spawn = target > active ? target - active : 0;
  return d;
}

namespace {
int& sized_count(PoolSettings& pool) {
  return sized_by_maximum(pool) ? pool.max_workers : pool.workers;
}
} // namespace

int grow_by_one(PoolSettings& pool) {
  return ++sized_count(pool);
}

int shrink_by_one(PoolSettings& pool) {
  int& n = sized_count(pool);
  if (n > 1) --n;
  if (sized_by_maximum(pool)) pool.workers = std::min(pool.workers, n);
  return n;
}

int resize_to(PoolSettings& pool, int target) {
  int& n = sized_count(pool);
  n = std::max(1, target);
  if (sized_by_maximum(pool)) pool.workers = std::min(pool.workers, n);
  return n;
}

bool wants_queued_connections(const PoolSettings& pool, const std::vector<PoolMember>& members) {
  if (pool.mode != PoolMode::OnDemand) return false;
  for (const PoolMember& m : members)
    if (is_waiting(m.state) || m.state == WorkerState::Starting) return false;
  int max = pool.max_workers > 0 ? pool.max_workers : 1;
  return static_cast<int>(members.size()) < max;
}

bool generation_ready(int workers, const std::vector<PoolMember>& members) {
  if (members.size() < static_cast<std::size_t>(std::max(workers, 0))) return false;
  return std::all_of(members.begin(), members.end(),
                     [](const PoolMember& m) { return is_ready(m.state); });
}

} // namespace process_manager
