#include "fcgi_host/runners/plugin.hpp"

#include "app/plugin.hpp"
#include "fcgi_host/net/listen_socket.hpp"

#include <dlfcn.h>
#include <stdexcept>

namespace fcgi_host {

Plugin::Plugin(const std::string& path) : path_(path) {
  library_ = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library_) throw StartupError(std::string("dlopen(\"") + path + "\") failed: " + dlerror());
  using EntryPoint = const fcgi_host_plugin* (*)();
  auto entry = reinterpret_cast<EntryPoint>(dlsym(library_, FCGI_HOST_PLUGIN_SYMBOL));
  if (!entry) {
    dlclose(library_);
    throw StartupError("\"" + path + "\" is not an fcgi-host plugin: it does not export " +
                       FCGI_HOST_PLUGIN_SYMBOL + " (use the FCGI_HOST_PLUGIN macro)");
  }
  entry_ = entry();
  if (!entry_ || entry_->abi_version != FCGI_HOST_PLUGIN_ABI_VERSION || !entry_->create ||
      !entry_->destroy) {
    unsigned version = entry_ ? entry_->abi_version : 0;
    dlclose(library_);
    throw StartupError("\"" + path + "\" was built for plugin ABI version " +
                       std::to_string(version) + "; this fcgi-host loads version " +
                       std::to_string(FCGI_HOST_PLUGIN_ABI_VERSION) + ": rebuild it");
  }
}

Plugin::~Plugin() {
  // Not dlclose()d: handler objects and their vtables may outlive an orderly shutdown.
}

bool Plugin::thread_safe() const {
  return (entry_->flags & FCGI_HOST_PLUGIN_THREAD_SAFE) != 0;
}

HandlerPtr Plugin::create() const {
  app::Handler* handler = entry_->create();
  if (!handler) throw std::runtime_error("plugin \"" + path_ + "\" created no handler");
  return HandlerPtr(handler, entry_->destroy);
}

} // namespace fcgi_host
