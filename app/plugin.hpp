#pragma once
// The plugin entry point: a shared library loaded with `fcgi-host --app path/to/libx.so` exports
// one C symbol, FCGI_HOST_PLUGIN_SYMBOL, returning this table. The host checks abi_version before
// it calls anything else, so a plugin built against other headers is refused at start with a
// clear message instead of crashing a worker. Handlers cross the boundary as C++ objects: build
// the plugin with the same compiler family and standard library as the host.
//
//   class MyHandler : public app::Handler { ... };
//   FCGI_HOST_PLUGIN(MyHandler)
#include "app/handler.hpp"

#include <cstdint>

#define FCGI_HOST_PLUGIN_ABI_VERSION 1
#define FCGI_HOST_PLUGIN_SYMBOL "fcgi_host_plugin_v1"

extern "C" {
struct fcgi_host_plugin {
  std::uint32_t abi_version; // FCGI_HOST_PLUGIN_ABI_VERSION the plugin was built with
  const char* name;          // for logs
  app::Handler* (*create)(); // called once in each worker
  void (*destroy)(app::Handler*);
};
}

#define FCGI_HOST_PLUGIN(HandlerClass)                                                             \
  extern "C" const fcgi_host_plugin* fcgi_host_plugin_v1() {                                       \
    static const fcgi_host_plugin plugin = {FCGI_HOST_PLUGIN_ABI_VERSION, #HandlerClass,           \
                                            []() -> app::Handler* { return new HandlerClass(); },  \
                                            [](app::Handler* h) { delete h; }};                    \
    return &plugin;                                                                                \
  }
