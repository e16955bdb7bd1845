#include "fcgi_host/cli/app_source.hpp"

#include "app/builtin_apps.hpp"
#include "app/plugin.hpp"
#include "fcgi_host/cli/settings_from_config.hpp"
#include "fcgi_host/runners/plugin.hpp"
#include "fcgi_host/runners/plugin_check.hpp"
#include "fcgi_host/sys_error.hpp"

#include <unistd.h>

namespace fcgi_host {

HandlerFactory AppSource::factory() const {
  if (own) {
    app::Handler* h = own;
    return [h] { return HandlerPtr(h, [](app::Handler*) {}); };
  }
  if (copy) return plugin_factory(copy, copy->path(), copy->source());
  if (!plugin.empty()) return plugin_factory(nullptr, plugin, plugin);
  std::string name = builtin;
  return [name] {
    return HandlerPtr(app::make_builtin_app(name).release(), [](app::Handler* h) { delete h; });
  };
}

bool looks_like_path(const std::string& app) {
  return app.find('/') != std::string::npos || app.ends_with(".so");
}

std::string plugin_file(const std::string& app, const std::string& start_dir) {
  if (app.empty() || app.front() == '/' || start_dir.empty()) return app;
  return start_dir + (start_dir.back() == '/' ? "" : "/") + app;
}

bool AppSource::thread_safe() const {
  if (own) return own_thread_safe;
  if (!plugin.empty()) return (plugin_flags & FCGI_HOST_PLUGIN_THREAD_SAFE) != 0;
  return true; // the built-in apps keep no state between requests
}

AppSource resolve_app(const Config& config, app::Handler* own, const std::string& start_dir,
                      bool own_thread_safe) {
  AppSource source;
  if (own) {
    if (config.app_given)
      throw ConfigError(config.where("app") + ": this program serves its own handler");
    if (config.threads > 1 && !own_thread_safe)
      throw ConfigError(config.where("threads") + ": " + std::to_string(config.threads) +
                        " threads would share this program's one handler object; serve it with "
                        "fcgi_host::run_thread_safe() if it is thread-safe, or with a plugin "
                        "(FCGI_HOST_PLUGIN: one instance per thread)");
    source.own = own;
    source.own_thread_safe = own_thread_safe;
  } else if (!config.exec.empty()) {
    // --exec: the program is the handler.
  } else if (looks_like_path(config.app)) {
    source.plugin = plugin_file(config.app, start_dir);
    if (::access(source.plugin.c_str(), R_OK) != 0)
      throw ConfigError(config.where("app") + ": " + sys_error("access", source.plugin));
  } else if (app::is_builtin_app(config.app)) {
    source.builtin = config.app;
  } else {
    throw ConfigError(config.where("app") + ": unknown app \"" + config.app +
                      "\" (built-ins: hello, echo; or the path of a plugin .so)");
  }
  return source;
}

std::string current_directory() {
  std::string dir(4096, '\0');
  if (!::getcwd(dir.data(), dir.size())) return "";
  dir.resize(std::char_traits<char>::length(dir.c_str()));
  return dir;
}

std::shared_ptr<PluginDirectory> plugin_directory(const Config& config,
                                                  std::shared_ptr<PluginDirectory> current) {
  const Credentials c = credentials(config);
  const gid_t gid = c.change ? c.gid : static_cast<gid_t>(-1);
  // Workers of another user get no copy of a file their user could not read itself.
  const uid_t uid = c.change && c.uid != ::geteuid() ? c.uid : static_cast<uid_t>(-1);
  // With --private-tmp the workers' /tmp is a tmpfs of their own: the copies go where they
  // still see them (/dev/shm, which that namespace does not replace).
  const std::string root = config.private_tmp ? "/dev/shm" : "";
  if (current && current->workers_gid() == gid && current->workers_uid() == uid &&
      current->root() == root)
    return current;
  try {
    return std::make_shared<PluginDirectory>(gid, root, uid);
  } catch (const StartupError& e) {
    throw ConfigError(config.where("app") + ": a private copy of the plugin: " + e.what());
  }
}

void copy_and_check_plugin(AppSource& app, const Config& config,
                           const std::shared_ptr<PluginDirectory>& dir) {
  if (app.plugin.empty()) return;
  try {
    app.copy = std::make_shared<PluginCopy>(dir, app.plugin);
  } catch (const StartupError& e) {
    throw ConfigError(config.where("app") + ": " + e.what());
  }
  PluginCheck check{app.copy->path(), app.plugin, credentials(config), config.clear_env,
                    config.env};
  if (std::string why = check_plugin(check, &app.plugin_flags); !why.empty())
    throw ConfigError(config.where("app") + ": " + why);
}

} // namespace fcgi_host
