#include "fcgi_host/cli/app_source.hpp"

#include "app/builtin_apps.hpp"
#include "fcgi_host/net/listen_socket.hpp" // StartupError

namespace fcgi_host {

HandlerFactory AppSource::factory() const {
  if (own) {
    app::Handler* h = own;
    return [h] { return HandlerPtr(h, [](app::Handler*) {}); };
  }
  if (plugin) {
    std::shared_ptr<Plugin> p = plugin;
    return [p] { return p->create(); };
  }
  std::string name = builtin;
  return [name] {
    return HandlerPtr(app::make_builtin_app(name).release(), [](app::Handler* h) { delete h; });
  };
}

bool looks_like_path(const std::string& app) {
  return app.find('/') != std::string::npos || app.ends_with(".so");
}

bool AppSource::thread_safe() const {
  if (own) return own_thread_safe;
  if (plugin) return plugin->thread_safe();
  return true; // the built-in apps keep no state between requests
}

AppSource resolve_app(const Config& config, app::Handler* own, bool own_thread_safe) {
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
    try {
      source.plugin = std::make_shared<Plugin>(config.app);
    } catch (const StartupError& e) {
      throw ConfigError(config.where("app") + ": " + e.what());
    }
  } else if (app::is_builtin_app(config.app)) {
    source.builtin = config.app;
  } else {
    throw ConfigError(config.where("app") + ": unknown app \"" + config.app +
                      "\" (built-ins: hello, echo; or the path of a plugin .so)");
  }
  return source;
}

} // namespace fcgi_host
