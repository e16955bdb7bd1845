#pragma once
// How many workers the current generation runs (--pm static | dynamic | ondemand, TTIN, TTOU,
// `fcgi-host scale`), as pure decisions over a snapshot of its workers, so that they are
// unit-tested without processes. The master takes the snapshot from its worker table and the
// scoreboard, and applies the decisions (master_pool.cpp: maintain_pool(), scale()).
#include "process_manager/pool_settings.hpp"
#include "process_manager/scoreboard.hpp"

#include <cstddef>
#include <cstdint>
#include <sys/types.h>
#include <vector>

namespace process_manager {

// One worker of the current generation that was not asked to stop, as the pool sees it.
struct PoolMember {
  pid_t pid = 0;
  WorkerState state = WorkerState::Starting; // its slot's, read once for the turn
  std::uint64_t started_at_ns = 0;
  std::uint64_t idle_since_ns = 0; // IdleWatch::idle_since_ns
};

// Since when a worker has been idle: from the first turn it is seen waiting with the same request
// count; a request served, or a busy turn, starts it over. A worker still starting keeps its
// value (0: it has never been idle).
struct IdleWatch {
  std::uint64_t idle_since_ns = 0; // 0: busy, or not seen idle yet
  std::uint64_t requests_seen = 0;
};
IdleWatch watch_idle(IdleWatch was, WorkerState state, std::uint64_t requests,
                     std::uint64_t now_ns);

// Dynamic and ondemand pools (php-fpm's semantics): the target moves with the idle count. A
// worker still starting counts as a spare on its way, so that one slow boot does not spawn a
// crowd. Static pools keep their target.
struct ScaleDecision {
  int workers = 0;           // the new target
  std::vector<pid_t> retire; // to stop now (one too many spares, or idle past idle_timeout)
};
ScaleDecision scale_pool(const PoolSettings& pool, const std::vector<PoolMember>& members,
                         bool connection_queued, std::uint64_t now_ns);

// The pool brought to its target `workers`, counting the `held` slots of crashed workers that
// wait for their replacement. Too many: give up held slots first, then retire the newest
// workers (the older ones hold the warmer caches). Too few: spawn the difference.
struct FitDecision {
  std::size_t release_held = 0; // the newest held slots to give up
  std::vector<pid_t> retire;    // newest first
  std::size_t spawn = 0;
};
FitDecision fit_to_target(int workers, std::size_t held, const std::vector<PoolMember>& members);

// TTIN, TTOU and `scale N`: static pools change `workers`, dynamic and ondemand pools their
// most workers (`workers` follows it down). Each returns the new count; TTOU and resize never
// go below one.
int grow_by_one(PoolSettings& pool);
int shrink_by_one(PoolSettings& pool);
int resize_to(PoolSettings& pool, int target);
// Whether the count those change is a maximum (dynamic, ondemand), for their log lines.
inline bool sized_by_maximum(const PoolSettings& pool) {
  return pool.mode != PoolMode::Static;
}

// Ondemand: whether a connection waiting on the listen socket should wake the master, that is,
// no worker is idle or starting and there is room for one more. (The socket stays readable
// while a connection waits: watched otherwise, the loop would spin.)
bool wants_queued_connections(const PoolSettings& pool, const std::vector<PoolMember>& members);

// A worker can serve once its slot has left Starting (the worker loop writes Idle before its
// first accept; the master writes it for an --exec program after its boot window).
inline bool is_ready(WorkerState s) {
  return s != WorkerState::Starting && s != WorkerState::Free;
}
// A generation is ready when it has its target count of workers and every one of them is.
bool generation_ready(int workers, const std::vector<PoolMember>& members);

} // namespace process_manager
