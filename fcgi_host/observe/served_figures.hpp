#pragma once
// What a canary rollout is judged on (process_manager/rollout.hpp): a worker's requests, 5xx
// answers and durations, summed over its route table (route_stats.hpp), which its request path
// already writes: the master reads the slots, the worker does no more work.
#include "process_manager/rollout.hpp"
#include "process_manager/scoreboard.hpp"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace fcgi_host {

// Slot `slot`'s figures (its worker's, since it started).
process_manager::ServedFigures served_figures(const process_manager::Scoreboard& sb,
                                              std::size_t slot);

// The upper bounds of the buckets those figures count durations in.
std::vector<std::uint64_t> served_latency_bounds();

} // namespace fcgi_host
