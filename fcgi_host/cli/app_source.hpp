#pragma once
// What --app names, resolved once per generation: a built-in app, a plugin, or the program's own
// handler (fcgi_host::run(argc, argv, handler)); for the master's workers (run.cpp) and for
// `fcgi-host replay` (replay_command.cpp). The master never loads a plugin: it makes the
// generation's private copy and has a child that dropped privileges check it
// (runners/plugin_copy.hpp, runners/plugin_check.hpp); each worker loads the copy after its drop.
#include "fcgi_host/cli/config.hpp"
#include "fcgi_host/runners/plugin_copy.hpp"
#include "fcgi_host/worker/worker.hpp"

#include <memory>
#include <string>

namespace fcgi_host {

struct AppSource {
  app::Handler* own = nullptr;
  std::string builtin;
  std::string plugin;                     // the operator's file, as an absolute path
  std::shared_ptr<const PluginCopy> copy; // what this generation's workers load

  // With a copy, the workers load it; without one (replay), the operator's file itself.
  HandlerFactory factory() const;
};

// A plugin's path rather than a built-in app's name.
bool looks_like_path(const std::string& app);

// The file --app names, absolute: a relative path or a bare name (`libtodo.so`) is a file in
// `start_dir` (where fcgi-host was started), never a search of the library path.
std::string plugin_file(const std::string& app, const std::string& start_dir);

// Throws ConfigError (naming --app, and FILE:LINE) for an app that cannot be served: an unknown
// built-in, a plugin file that cannot be read. Loads nothing.
AppSource resolve_app(const Config& config, app::Handler* own, const std::string& start_dir);

// A plugin: its private copy in `dir`, checked by a child with the workers' credentials (the
// copy is what the generation's workers will load). Throws ConfigError naming --app, the file
// and why it does not load. Nothing for other apps.
void copy_and_check_plugin(AppSource& app, const Config& config,
                           const std::shared_ptr<PluginDirectory>& dir);

// getcwd(), or "" when it cannot say.
std::string current_directory();

// The directory a master keeps its generations' copies in, for the workers' group: `current`
// when it is for that group, else a new one (the old one goes with its last copy).
std::shared_ptr<PluginDirectory> plugin_directory(const Config& config,
                                                  std::shared_ptr<PluginDirectory> current);

} // namespace fcgi_host
