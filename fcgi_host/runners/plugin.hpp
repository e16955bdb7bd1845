#pragma once
// Loads a handler plugin (--app path/to/libx.so) in the master, before any fork: a missing file,
// a library without the entry point or one built for another ABI version is refused at start,
// and every worker inherits the loaded library.
#include "fcgi_host/worker/worker.hpp"

#include <string>

struct fcgi_host_plugin;

namespace fcgi_host {

class Plugin {
public:
  // Throws StartupError naming the path and what is wrong.
  explicit Plugin(const std::string& path);
  ~Plugin();
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  HandlerPtr create() const;
  // FCGI_HOST_PLUGIN_THREAD_SAFE: one instance may serve every handler thread.
  bool thread_safe() const;
  const std::string& path() const { return path_; }

private:
  std::string path_;
  void* library_ = nullptr;
  const fcgi_host_plugin* entry_ = nullptr;
};

} // namespace fcgi_host
