#include "process_manager/worker_table.hpp"

#include <algorithm>
#include <utility>

namespace process_manager {

bool Child::mark_signalled(int sig) {
  std::uint64_t bit = std::uint64_t{1} << sig;
  if (signalled & bit) return false;
  signalled |= bit;
  return true;
}

std::optional<std::size_t> WorkerTable::allocate_slot() {
  auto it = std::find(slot_used_.begin(), slot_used_.end(), false);
  if (it == slot_used_.end()) return std::nullopt;
  *it = true;
  return static_cast<std::size_t>(it - slot_used_.begin());
}

std::optional<Child> WorkerTable::remove(pid_t pid) {
  auto it = std::find_if(workers_.begin(), workers_.end(), [&](auto& w) { return w.pid == pid; });
  if (it == workers_.end()) return std::nullopt;
  Child w = std::move(*it);
  workers_.erase(it);
  release_slot(w.slot);
  return w;
}

Child* WorkerTable::find(pid_t pid) {
  auto it = std::find_if(workers_.begin(), workers_.end(), [&](auto& w) { return w.pid == pid; });
  return it == workers_.end() ? nullptr : &*it;
}

std::size_t WorkerTable::count_active(std::uint32_t generation) const {
  return std::count_if(workers_.begin(), workers_.end(),
                       [&](auto& w) { return w.generation == generation && !w.stopping(); });
}

std::size_t WorkerTable::count_active_except(std::uint32_t generation) const {
  return std::count_if(workers_.begin(), workers_.end(),
                       [&](auto& w) { return w.generation != generation && !w.stopping(); });
}

} // namespace process_manager
