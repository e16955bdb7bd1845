#include "fcgi_host/cli/plan_pools.hpp"

#include "fcgi_host/cli/start_checks.hpp"

#include <map>
#include <sstream>
#include <sys/stat.h>

namespace fcgi_host {
namespace {

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
  std::vector<std::string> words = pool_args(args, name);
  std::vector<const char*> argv;
  for (const std::string& w : words)
    argv.push_back(w.c_str());
  Config c;
  std::ostringstream ignored;
  try {
    parse_config(static_cast<int>(argv.size()), argv.data(), c, ignored);
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

} // namespace

std::vector<std::string> pool_args(const std::vector<std::string>& args, const std::string& name) {
  std::vector<std::string> out = args;
  out.push_back("--pool");
  out.push_back(name);
  return out;
}

std::vector<PoolPlan> plan_pools(const std::vector<std::string>& args, const Config& file,
                                 const ApplicationCheck& check) {
  std::vector<PoolPlan> plans;
  std::map<std::string, std::string> addresses; // address -> pool
  int total = 0;
  for (const std::string& name : file.pools) {
    PoolPlan p{name, parse_pool(args, name, check), "", ""};
    const std::string address = p.config.listen.to_string();
    if (auto [it, fresh] = addresses.emplace(address, name); !fresh)
      throw ConfigError(p.config.where("listen") + ": pool [" + name + "] listens on " + address +
                        ", as pool [" + it->second + "] does");
    total += ceiling(p.config);
    p.settings = p.config.settings_text + "code " + code_identity(p.config) + "\n";
    p.socket = socket_settings(p.config);
    plans.push_back(std::move(p));
  }
  if (file.max_workers_total > 0 && total > file.max_workers_total) {
    std::string each;
    for (const PoolPlan& p : plans)
      each += (each.empty() ? "" : ", ") + p.name + " " + std::to_string(ceiling(p.config));
    throw ConfigError(file.where("max-workers-total") + ": the pools may have " +
                      std::to_string(total) + " workers together (" + each + "), over " +
                      std::to_string(file.max_workers_total));
  }
  return plans;
}

} // namespace fcgi_host
