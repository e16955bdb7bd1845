#pragma once
// What start needs beyond well-formed options, checked before anything is bound or forked, and
// by --test-config: users and groups exist, directories and programs are there, addresses
// resolve, log files can be opened. Each failure is a ConfigError naming the option (and
// FILE:LINE when it came from the config file), so a config that --test-config calls valid does
// not fail at start for a reason it could have seen.
#include "fcgi_host/cli/config.hpp"

namespace fcgi_host {

// Throws ConfigError for the first problem found.
void check_before_start(const Config& config);

} // namespace fcgi_host
