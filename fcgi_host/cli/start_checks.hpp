#pragma once
// What start needs beyond well-formed options, checked before anything is bound or forked, and
// by --test-config: users and groups exist, directories and programs are there, addresses
// resolve, log files can be opened. Each failure is a ConfigError naming the option (and
// FILE:LINE when it came from the config file), so a config that --test-config calls valid does
// not fail at start for a reason it could have seen.
#include "fcgi_host/cli/config.hpp"

#include <string>
#include <vector>

namespace fcgi_host {

// Throws ConfigError for the first problem found. Start and --test-config both run it (for one
// application, and for each pool): the one list of what a start checks before it binds.
void check_before_start(const Config& config);

// The master of several pools: its own --status-listen socket, as check_before_start checks
// each pool's sockets (same refusals, in start and --test-config).
void check_pools_master(const Config& config);

// What a start meets that --test-config only reports, one line each: a server listening on
// --listen or --status-listen now. The running host itself holds them when a config is checked
// before its reload or upgrade (which keep the sockets), so they are notes, not refusals.
std::vector<std::string> addresses_in_use(const Config& config);

// What a start allows but says at warn level every time (and --test-config prints), one line
// each: workers that run as root (--user root), the built-in echo app named in a config file (a
// test app: it shows a request's cookies and Authorization header back and crashes on /crash),
// a path under /tmp that --private-tmp hides from the workers (--sandbox-write /tmp/x).
std::vector<std::string> risky_settings(const Config& config);

// What that list checks, one line each (for the docs and the tests that hold them together).
std::vector<std::string> start_check_list();

} // namespace fcgi_host
