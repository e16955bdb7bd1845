#include "fcgi_host/cli/plan_pools.hpp"

#include "fcgi_host/cli/settings_from_config.hpp"
#include "fcgi_host/cli/start_checks.hpp"
#include "fcgi_host/sandbox/sandbox.hpp"
#include "process_manager/argv.hpp"

#include <map>
#include <sstream>
#include <sys/stat.h>

namespace fcgi_host {
namespace {

// The command line a pool's master is started with: `args` and `--pool NAME`.
std::vector<std::string> pool_args(const std::vector<std::string>& args, const std::string& name) {
  std::vector<std::string> out = args;
  out.push_back("--pool");
  out.push_back(name);
  return out;
}

// Size, mtime and inode of the file a pool runs: a new build of a plugin reloads its pool.
std::string code_identity(const Config& c) {
  const std::string path = c.exec.empty() ? c.app : c.exec.front();
  struct stat st {};
  if (path.find('/') == std::string::npos || ::stat(path.c_str(), &st) != 0) return path;
  return path + " " + std::to_string(st.st_size) + " " + std::to_string(st.st_mtim.tv_sec) + "." +
         std::to_string(st.st_mtim.tv_nsec) + " " + std::to_string(st.st_ino);
}

std::string socket_settings(const Config& c) {
  std::ostringstream s;
  s << c.listen.to_string() << " backlog " << c.backlog << " mode " << std::oct << c.socket_mode
    << std::dec << " owner " << c.socket_owner << " group " << c.socket_group
    << (c.exec.empty() ? " built-in workers" : " exec");
  return s.str();
}

Config parse_pool(const std::vector<std::string>& args, const std::string& name,
                  const ApplicationCheck& check) {
  process_manager::Argv argv(pool_args(args, name));
  Config c;
  std::ostringstream ignored;
  try {
    parse_config(argv.argc(), argv.cdata(), c, ignored);
    check(c);
  } catch (const std::exception& e) {
    throw ConfigError("pool [" + name + "]: " + e.what());
  }
  if (c.listen.kind == ListenAddress::Kind::Inherited)
    throw ConfigError("pool [" + name +
                      "]: listen is not set (every pool has a socket of its own)");
  return c;
}

int ceiling(const Config& c) {
  return c.pm == "static" ? c.workers : std::max(c.workers, c.max_workers);
}

PoolSpec spec_of(const std::vector<std::string>& args, const std::string& name, const Config& c) {
  PoolSpec p;
  p.name = name;
  p.args = pool_args(args, name);
  p.listen = c.listen.to_string();
  p.status_listen = c.status_listen;
  if (c.memory_max)
    p.memory_max = *c.memory_max == Config::kUnlimited ? kNoMemoryLimit : *c.memory_max;
  p.cpu_weight = c.cpu_weight;
  p.where_memory_max = c.where("memory-max");
  p.where_cpu_weight = c.where("cpu-weight");
  p.sandbox = sandbox_line(c);
  p.settings = c.settings_text + "code " + code_identity(c) + "\n";
  p.socket = socket_settings(c);
  return p;
}

} // namespace

std::vector<PoolSpec> plan_pools(const std::vector<std::string>& args, const Config& file,
                                 const ApplicationCheck& check) {
  std::vector<PoolSpec> specs;
  std::map<std::string, std::string> addresses; // address -> pool
  std::string each;
  int total = 0;
  for (const std::string& name : file.pools) {
    const Config c = parse_pool(args, name, check);
    const std::string address = c.listen.to_string();
    if (auto [it, fresh] = addresses.emplace(address, name); !fresh)
      throw ConfigError(c.where("listen") + ": pool [" + name + "] listens on " + address +
                        ", as pool [" + it->second + "] does");
    total += ceiling(c);
    each += (each.empty() ? "" : ", ") + name + " " + std::to_string(ceiling(c));
    specs.push_back(spec_of(args, name, c));
  }
  if (file.max_workers_total > 0 && total > file.max_workers_total)
    throw ConfigError(file.where("max-workers-total") + ": the pools may have " +
                      std::to_string(total) + " workers together (" + each + "), over " +
                      std::to_string(file.max_workers_total));
  return specs;
}

SupervisorSpec supervisor_spec(const std::vector<std::string>& args, const Config& file,
                               const ApplicationCheck& check, const std::string& executable) {
  SupervisorSpec s;
  s.args = args;
  s.executable = executable;
  s.pidfile = file.pidfile;
  if (!file.status_listen.empty()) s.status_listen = status_listen_options(file);
  s.observability = observability_settings(file);
  s.ping_response = file.ping_response;
  s.read_pools = [args, check] {
    process_manager::Argv argv(args);
    Config again;
    std::ostringstream ignored;
    parse_config(argv.argc(), argv.cdata(), again, ignored);
    if (again.pools.empty())
      throw ConfigError("the config file defines no pools any more (a restart runs it as one "
                        "application)");
    return plan_pools(args, again, check);
  };
  return s;
}

} // namespace fcgi_host
