#pragma once
// The pools of a config file, each checked as its own master will start it: the master of
// several pools reads them all at start and at every reload, and refuses the whole file when one
// pool is wrong, so a reload never stops a pool it could not start again.
#include "fcgi_host/cli/config.hpp"

#include <functional>
#include <string>
#include <vector>

namespace fcgi_host {

struct PoolPlan {
  std::string name;
  Config config; // as `fcgi-host ARGS --pool NAME` parses it
  // Every option the pool's master takes, and the identity of the code it runs (plugin or
  // program: path, size, mtime): when it changes, the pool reloads.
  std::string settings;
  // What a reload cannot change in place (the socket, --exec or not): when it changes, the pool
  // restarts.
  std::string socket;
};

// The checks a start makes of one application (the app or program, users, directories, ...);
// throws ConfigError or StartupError.
using ApplicationCheck = std::function<void(const Config&)>;

// `args`: the command line (argv[0] first); `file`: what it parsed, with `pools` listed. Throws
// ConfigError naming the pool: a bad pool, a pool without `listen`, two pools on one address,
// more workers than --max-workers-total.
std::vector<PoolPlan> plan_pools(const std::vector<std::string>& args, const Config& file,
                                 const ApplicationCheck& check);

// The command line a pool's master is started with: `args` and `--pool NAME`.
std::vector<std::string> pool_args(const std::vector<std::string>& args, const std::string& name);

} // namespace fcgi_host
