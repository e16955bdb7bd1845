#pragma once
// Loads a handler plugin (--app path/to/libx.so). Only in a process that has dropped its
// privileges: a worker, after the drop, loads its generation's private copy of the file
// (plugin_copy.hpp), and the checks at start and reload load it in a child that drops first
// (plugin_check.hpp). The master never maps plugin code: no plugin code runs as root, and a file
// rewritten under a running host cannot change a page the master executes.
#include "fcgi_host/worker/handler_factory.hpp"

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

struct fcgi_host_plugin;

namespace fcgi_host {

class Plugin {
public:
  // dlopen()s `file` and checks its table; errors name `shown_as` (the path the operator gave,
  // not the private copy). Throws StartupError naming the path and what is wrong.
  Plugin(const std::string& file, const std::string& shown_as);
  ~Plugin();
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  HandlerPtr create() const;
  const std::string& path() const { return shown_as_; }
  std::uint32_t flags() const; // FCGI_HOST_PLUGIN_* bits (app/plugin.hpp)
  // Runs the plugin's mold hook (FCGI_HOST_MOLD), when it has one. Throws StartupError naming
  // the plugin and what the hook threw.
  void run_mold_hook() const;

private:
  std::string shown_as_;
  void* library_ = nullptr;
  const fcgi_host_plugin* entry_ = nullptr;
  void (*mold_hook_)() = nullptr;
};

// One process's load of a plugin: the first load() (or create()) loads it and runs its mold
// hook, once, also when handler threads ask at the same time (a load that threw is tried
// again). A mold loads before it forks: its workers find it loaded and warmed.
class PluginLoader {
public:
  PluginLoader(std::string file, std::string shown_as)
      : file_(std::move(file)), shown_as_(std::move(shown_as)) {}
  PluginLoader(const PluginLoader&) = delete;
  PluginLoader& operator=(const PluginLoader&) = delete;

  // The mold's own copy of the file (mold_boot.hpp), set before the load.
  void set_file(std::string file) { file_ = std::move(file); }
  const Plugin& load();
  HandlerPtr create() { return load().create(); }
  // Its table's FCGI_HOST_PLUGIN_THREAD_SAFE (loads it).
  bool thread_safe();
  const std::string& shown_as() const { return shown_as_; }

private:
  std::string file_;
  std::string shown_as_;
  std::once_flag once_;
  std::unique_ptr<Plugin> plugin_;
};

// Why a plugin's table is not one this host loads, naming the first difference and what to do
// ("sizeof(app::Request) is 280 in the plugin, 312 in this fcgi-host; rebuild the plugin against
// fcgi-host 0.1.0"); empty when it is.
std::string plugin_abi_mismatch(const fcgi_host_plugin& table);

// "2-1a2b3c4d": the table's version and the layout identity (app/plugin_abi.hpp), for --version.
std::string plugin_abi_text();

// A worker's handler factory: the first call (in the worker, after the drop) loads `file`, every
// call creates a handler from it.
HandlerFactory plugin_factory(std::shared_ptr<const void> keep, std::string file,
                              std::string shown_as);
// The same over a loader that may be loaded already (by the mold the worker was forked from).
HandlerFactory plugin_factory(std::shared_ptr<PluginLoader> loader);

} // namespace fcgi_host
