#pragma once
// The plugin entry point: a shared library loaded with `fcgi-host --app path/to/libx.so` exports
// one C symbol, FCGI_HOST_PLUGIN_SYMBOL, returning this table. Before it calls anything else
// the host checks abi_version (this table's layout) and the layout identity the plugin was
// compiled with (plugin_abi.hpp: the sizes of the types that cross the boundary, the standard
// library, the compiler family), so a plugin built against other headers is refused with a line
// naming what differs instead of crashing a worker. Handlers cross the boundary as C++ objects.
//
//   class MyHandler : public app::Handler { ... };
//   FCGI_HOST_PLUGIN(MyHandler)
#include "app/handler.hpp"
#include "app/plugin_abi.hpp"

#include <cstdint>

// The layout of the table below (its first field stays first in every version).
#define FCGI_HOST_PLUGIN_ABI_VERSION 2
#define FCGI_HOST_PLUGIN_SYMBOL "fcgi_host_plugin_v2"
// What plugins built against the first release's headers export: named when refusing them.
#define FCGI_HOST_PLUGIN_SYMBOL_V1 "fcgi_host_plugin_v1"

extern "C" {
struct fcgi_host_plugin {
  std::uint32_t abi_version;   // FCGI_HOST_PLUGIN_ABI_VERSION the plugin was built with
  std::uint32_t layout_size;   // the number of entries in layout
  const std::uint32_t* layout; // app::plugin_abi::kLayout as the plugin was compiled
  const char* name;            // for logs
  app::Handler* (*create)();   // called once in each worker
  void (*destroy)(app::Handler*);
  std::uint32_t flags; // FCGI_HOST_PLUGIN_* bits below
};
}

// One handler instance may serve every handler thread of a worker at once (--threads T > 1);
// without it each thread gets an instance of its own from create().
#define FCGI_HOST_PLUGIN_THREAD_SAFE 1u

#define FCGI_HOST_PLUGIN_WITH_FLAGS(HandlerClass, Flags)                                           \
  extern "C" const fcgi_host_plugin* fcgi_host_plugin_v2() {                                       \
    static const fcgi_host_plugin plugin = {                                                       \
        FCGI_HOST_PLUGIN_ABI_VERSION,                                                              \
        static_cast<std::uint32_t>(app::plugin_abi::kLayout.size()),                               \
        app::plugin_abi::kLayout.data(),                                                           \
        #HandlerClass,                                                                             \
        []() -> app::Handler* { return new HandlerClass(); },                                      \
        [](app::Handler* h) { delete h; },                                                         \
        Flags};                                                                                    \
    return &plugin;                                                                                \
  }
// The mold hook: `void function()`, run once before the first handler is created. With
// `--mold on` it runs once in the pool's mold, before the workers are forked from it (they share
// what it built, copy-on-write); without, once in each worker, before on_worker_start. Build
// shared read-only state there (tables, parsed files, models); start no thread, open no socket
// meant for one worker, and reseed random generators in on_worker_start (docs/plugins.md).
//
//   static void build_tables() { ... }
//   FCGI_HOST_MOLD(build_tables)
#define FCGI_HOST_MOLD_SYMBOL "fcgi_host_mold_v1"
#define FCGI_HOST_MOLD(function)                                                                   \
  extern "C" void fcgi_host_mold_v1() {                                                            \
    function();                                                                                    \
  }

// A handler class of which each handler thread gets its own instance.
#define FCGI_HOST_PLUGIN(HandlerClass) FCGI_HOST_PLUGIN_WITH_FLAGS(HandlerClass, 0u)
// A handler class whose one instance serves all threads (it guards its own shared state).
#define FCGI_HOST_THREAD_SAFE_PLUGIN(HandlerClass)                                                 \
  FCGI_HOST_PLUGIN_WITH_FLAGS(HandlerClass, FCGI_HOST_PLUGIN_THREAD_SAFE)
