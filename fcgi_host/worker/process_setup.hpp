#pragma once
// What a worker process is set up with after the fork and before its first request: the
// user and group it runs as, and its environment.
#include <string>
#include <sys/types.h>
#include <vector>

namespace fcgi_host {

struct Credentials {
  bool change = false; // --user or --group given
  uid_t uid = 0;
  gid_t gid = 0;
  std::string user; // for initgroups; empty with --group alone
  // Started as root: who the workers run as ("nobody:nogroup"), and whether that was chosen
  // for the operator (no --user given). Empty when not started as root.
  std::string run_as;
  bool default_user = false;
};

// The user workers of a master started as root run as when no --user is given, as nginx does:
// a worker never runs as root unless the operator says --user root.
inline constexpr const char* kDefaultWorkerUser = "nobody";

// Resolves --user and --group at start; throws StartupError for an unknown name, or when
// fcgi-host is not root and would need to be. As root without --user: kDefaultWorkerUser with
// its own group (nogroup on Debian), or --group.
Credentials resolve_credentials(const std::string& user_option, const std::string& group_option);

// In the worker: drops to `c` for good (supplementary groups, group, then user). False, with
// errno, when the kernel refused.
bool drop_privileges(const Credentials& c);

// PATH in a cleared environment (--clear-env on), unless --env sets it: systemd's for services.
inline constexpr const char* kClearedPath = "/usr/local/bin:/usr/bin:/bin";

// In the worker: with `clear` (--clear-env on, the default) an empty environment but for PATH =
// kClearedPath, as php-fpm's clear_env; then each --env NAME=VALUE.
void apply_environment(bool clear, const std::vector<std::string>& env);

} // namespace fcgi_host
