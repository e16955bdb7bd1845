#include "fcgi_host/runners/plugin.hpp"

#include "app/plugin.hpp"
#include "fcgi_host/config/version.hpp"
#include "fcgi_host/sys_error.hpp"

#include <cstdio>
#include <dlfcn.h>
#include <exception>
#include <mutex>
#include <stdexcept>

namespace fcgi_host {

namespace {
std::string rebuild_hint() {
  return std::string("rebuild the plugin against fcgi-host ") + kVersion + " (plugin ABI " +
         plugin_abi_text() + ")";
}

// One entry of the layout identity as the refusal shows it: sizes in decimal, the declarations'
// hash (the last entry) in hex, as `fcgi-host --version` prints hashes.
std::string layout_entry_text(std::size_t index, std::uint32_t value) {
  if (index + 1 != app::plugin_abi::kLayout.size()) return std::to_string(value);
  char text[16];
  std::snprintf(text, sizeof text, "%08x", unsigned{value});
  return text;
}
} // namespace

std::string plugin_abi_text() {
  char text[32];
  std::snprintf(text, sizeof text, "%u-%08x", unsigned{FCGI_HOST_PLUGIN_ABI_VERSION},
                unsigned{app::plugin_abi::identity()});
  return text;
}

std::string plugin_abi_mismatch(const fcgi_host_plugin& table) {
  if (table.abi_version != FCGI_HOST_PLUGIN_ABI_VERSION)
    return "its plugin table is version " + std::to_string(table.abi_version) + ", this host's " +
           std::to_string(FCGI_HOST_PLUGIN_ABI_VERSION) + "; " + rebuild_hint();
  const auto& ours = app::plugin_abi::kLayout;
  if (!table.layout || table.layout_size != ours.size())
    return "its layout identity has " + std::to_string(table.layout_size) + " entries, this " +
           "host's " + std::to_string(ours.size()) + "; " + rebuild_hint();
  for (std::size_t i = 0; i < ours.size(); ++i)
    if (table.layout[i] != ours[i])
      return std::string(app::plugin_abi::kLayoutNames[i]) + " is " +
             layout_entry_text(i, table.layout[i]) + " in the plugin, " +
             layout_entry_text(i, ours[i]) + " in this fcgi-host; " + rebuild_hint();
  if (!table.create || !table.destroy) return "its plugin table has no create or destroy function";
  return "";
}

Plugin::Plugin(const std::string& file, const std::string& shown_as) : shown_as_(shown_as) {
  library_ = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!library_) {
    std::string why = dlerror();
    if (file != shown_as) // name the operator's file, not the private copy
      if (auto at = why.find(file); at != std::string::npos) why.replace(at, file.size(), shown_as);
    throw StartupError("dlopen(\"" + shown_as + "\") failed: " + why);
  }
  using EntryPoint = const fcgi_host_plugin* (*)();
  auto entry = reinterpret_cast<EntryPoint>(dlsym(library_, FCGI_HOST_PLUGIN_SYMBOL));
  if (!entry) {
    bool older = dlsym(library_, FCGI_HOST_PLUGIN_SYMBOL_V1) != nullptr;
    dlclose(library_);
    if (older)
      throw StartupError("\"" + shown_as + "\" was built against an older fcgi-host (it exports " +
                         FCGI_HOST_PLUGIN_SYMBOL_V1 + "); " + rebuild_hint());
    throw StartupError("\"" + shown_as + "\" is not an fcgi-host plugin: it does not export " +
                       FCGI_HOST_PLUGIN_SYMBOL + " (use the FCGI_HOST_PLUGIN macro)");
  }
  // The table is plain data: reading it runs none of the plugin's handler code.
  entry_ = entry();
  mold_hook_ = reinterpret_cast<void (*)()>(dlsym(library_, FCGI_HOST_MOLD_SYMBOL));
  std::string why = entry_ ? plugin_abi_mismatch(*entry_) : "its entry point returned no table";
  if (!why.empty()) {
    dlclose(library_);
    throw StartupError("\"" + shown_as + "\" does not match this fcgi-host: " + why);
  }
}

void Plugin::run_mold_hook() const {
  if (!mold_hook_) return;
  try {
    mold_hook_();
  } catch (const std::exception& e) {
    throw StartupError("the mold hook of \"" + shown_as_ + "\" failed: " + e.what());
  } catch (...) {
    throw StartupError("the mold hook of \"" + shown_as_ +
                       "\" failed: an exception of unknown type");
  }
}

Plugin::~Plugin() {
  // Not dlclose()d: handler objects and their vtables may outlive an orderly shutdown.
}

HandlerPtr Plugin::create() const {
  app::Handler* handler = entry_->create();
  if (!handler) throw std::runtime_error("plugin \"" + shown_as_ + "\" created no handler");
  return HandlerPtr(handler, entry_->destroy);
}

std::uint32_t Plugin::flags() const {
  return entry_->flags;
}

const Plugin& PluginLoader::load() {
  std::call_once(once_, [this] {
    auto plugin = std::make_unique<Plugin>(file_, shown_as_);
    plugin->run_mold_hook();
    plugin_ = std::move(plugin);
  });
  return *plugin_;
}

bool PluginLoader::thread_safe() {
  return (load().flags() & FCGI_HOST_PLUGIN_THREAD_SAFE) != 0;
}

HandlerFactory plugin_factory(std::shared_ptr<PluginLoader> loader) {
  return [loader = std::move(loader)] { return loader->create(); };
}

HandlerFactory plugin_factory(std::shared_ptr<const void> keep, std::string file,
                              std::string shown_as) {
  // Shared by the copies of the factory in one process; loaded in the worker only.
  auto loader = std::make_shared<PluginLoader>(std::move(file), std::move(shown_as));
  return [keep = std::move(keep), loader] { return loader->create(); };
}

} // namespace fcgi_host
