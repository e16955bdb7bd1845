#pragma once
// The memory of the host's processes for the status page: PSS (each shared page divided among the
// processes that map it, so the figures of a pool add up to what it costs) and RSS, from
// /proc/PID/smaps_rollup. Read when a status page is asked for, never on the request path: one
// open and one read of about 1 KiB per process, and the kernel's walk of that process's page
// tables. A process that exited or cannot be read (a worker reading its siblings after dropping
// root's rights, a sandboxed one: see docs/observability.md) is left out.
#include "fcgi_host/observe/metrics.hpp"

#include <cstdint>
#include <optional>
#include <string_view>
#include <sys/types.h>

namespace fcgi_host {

// The "Rss:" and "Pss:" lines of smaps_rollup text (in kB); nullopt when either is missing.
std::optional<ProcessMemory> parse_smaps_rollup(std::string_view text);

// /proc/PID/smaps_rollup of `pid`; the file at `path` (smaps_rollup's format). nullopt when it
// cannot be opened or parsed.
std::optional<ProcessMemory> read_process_memory(pid_t pid);
std::optional<ProcessMemory> read_smaps_rollup_file(const char* path);

// Fills the figures of the workers that can be read, and the pool's total: theirs and the
// master's (`master_pid`), none when the master cannot be read.
void add_process_memory(Snapshot& snap, pid_t master_pid);

} // namespace fcgi_host
