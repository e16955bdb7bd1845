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
  bool own_thread_safe = false; // fcgi_host::run_thread_safe()
  std::shared_ptr<Plugin> plugin;
  std::string builtin;

  HandlerFactory factory() const;
  // One instance may serve every handler thread (--threads): built-in apps, a plugin made with
  // FCGI_HOST_THREAD_SAFE_PLUGIN, a program's handler given to run_thread_safe().
  bool thread_safe() const;
};

// A plugin's path rather than a built-in app's name.
bool looks_like_path(const std::string& app);

// Throws ConfigError (naming --app, and FILE:LINE) for an app that cannot be served, or a
// program's one handler object with --threads above 1 that was not declared thread-safe.
AppSource resolve_app(const Config& config, app::Handler* own, bool own_thread_safe = false);

} // namespace fcgi_host
