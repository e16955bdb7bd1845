#pragma once
// The pools of a config file, each checked as its own master will start it, and handed to the
// supervisor of the pools (pools/) as narrow specs: the master of several pools reads them all
// at start and at every reload, and refuses the whole file when one pool is wrong, so a reload
// never stops a pool it could not start again.
#include "fcgi_host/cli/config.hpp"
#include "fcgi_host/pools/spec.hpp"

#include <functional>
#include <string>
#include <vector>

namespace fcgi_host {

// The checks a start makes of one application (the app or program, users, directories, ...);
// throws ConfigError or StartupError.
using ApplicationCheck = std::function<void(const Config&)>;

// `args`: the command line (argv[0] first); `file`: what it parsed, with `pools` listed. Throws
// ConfigError naming the pool: a bad pool, a pool without `listen`, two pools on one address,
// more workers than --max-workers-total.
std::vector<PoolSpec> plan_pools(const std::vector<std::string>& args, const Config& file,
                                 const ApplicationCheck& check);

// What the supervisor runs on: `file`'s global options, and a way to read every pool again.
SupervisorSpec supervisor_spec(const std::vector<std::string>& args, const Config& file,
                               const ApplicationCheck& check, const std::string& executable);

} // namespace fcgi_host
