#pragma once
// A descriptor an old master handed to its new image across exec, named by an environment
// variable (config/exec_env.hpp).

namespace fcgi_host {

// The fd named by the variable `name`, made close-on-exec again, and the variable removed; -1
// when absent, not a number or not open.
int take_fd_from_env(const char* name);

} // namespace fcgi_host
