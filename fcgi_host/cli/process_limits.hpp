#pragma once
// --rlimit-files, --rlimit-core and --nice: set on the master at start, before the first fork,
// so that every worker (and an --exec program) inherits them. Per pool, since each pool has a
// master of its own.
#include "fcgi_host/cli/config.hpp"

namespace fcgi_host {

// Throws StartupError naming the option and the call the kernel refused (raising a hard limit
// or lowering the niceness takes root).
void apply_process_limits(const Config& config);

} // namespace fcgi_host
