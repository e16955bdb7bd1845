#include "fcgi_host/cli/process_limits.hpp"

#include "fcgi_host/sys_error.hpp"

#include <cerrno>
#include <sys/resource.h>

namespace fcgi_host {
namespace {

void set_limit(const Config& config, const char* option, int resource, const char* name,
               unsigned long long value) {
  const rlim_t limit = value == Config::kUnlimited ? RLIM_INFINITY : static_cast<rlim_t>(value);
  const rlimit both{limit, limit};
  if (::setrlimit(resource, &both) != 0)
    throw StartupError(config.where(option) + ": " +
                       sys_error("setrlimit", std::string(name) + ", " + std::to_string(value)));
}

} // namespace

void apply_process_limits(const Config& config) {
  if (config.rlimit_files)
    set_limit(config, "rlimit-files", RLIMIT_NOFILE, "RLIMIT_NOFILE", *config.rlimit_files);
  if (config.rlimit_core)
    set_limit(config, "rlimit-core", RLIMIT_CORE, "RLIMIT_CORE", *config.rlimit_core);
  if (config.nice && ::setpriority(PRIO_PROCESS, 0, *config.nice) != 0)
    throw StartupError(config.where("nice") + ": " +
                       sys_error("setpriority", "PRIO_PROCESS, " + std::to_string(*config.nice)));
}

} // namespace fcgi_host
