#pragma once
// A process's children and parent, as /proc shows them: for the master of the pools, which
// adopts a pool's new master after that pool's own binary upgrade (it is a child subreaper), and
// moves its own processes between cgroups.
#include <sys/types.h>
#include <vector>

namespace process_manager {

// The children of `pid` (/proc/PID/task/PID/children of a single-threaded process, or, where the
// kernel lacks that file, every process whose parent it is).
std::vector<pid_t> children_of(pid_t pid);

// The parent of `pid` (field 4 of /proc/PID/stat), 0 when it is gone.
pid_t parent_of(pid_t pid);

// Whether `pid` is `ancestor` itself or one of its descendants, by the parents /proc shows (a
// walk of at most kMaxAncestry steps; a chain longer than that counts as a descendant: refused
// rather than trusted). An orphan of a child subreaper's subtree is reparented to it, so it
// stays a descendant.
inline constexpr int kMaxAncestry = 1024;
bool descends_from(pid_t pid, pid_t ancestor);

} // namespace process_manager
