#pragma once
// What --app names, resolved once: a built-in app, a loaded plugin, or the program's own
// handler (fcgi_host::run(argc, argv, handler)); for the master's workers (run.cpp) and for
// `fcgi-host replay` (replay_command.cpp).
#include "fcgi_host/cli/config.hpp"
#include "fcgi_host/runners/plugin.hpp"
#include "fcgi_host/worker/worker.hpp"

#include <memory>
#include <string>

namespace fcgi_host {

struct AppSource {
  app::Handler* own = nullptr;
  std::shared_ptr<Plugin> plugin;
  std::string builtin;

  HandlerFactory factory() const;
};

// A plugin's path rather than a built-in app's name.
bool looks_like_path(const std::string& app);

// Throws ConfigError (naming --app, and FILE:LINE) for an app that cannot be served.
AppSource resolve_app(const Config& config, app::Handler* own);

} // namespace fcgi_host
