#pragma once
// How a worker gets its handler: a small header of its own, so that the installed in-process
// host names it without the worker's internals.
#include "app/handler.hpp"

#include <functional>
#include <memory>

namespace fcgi_host {

// A handler and how to dispose of it (plugins delete through their own entry point).
using HandlerPtr = std::unique_ptr<app::Handler, void (*)(app::Handler*)>;
// Called once in each worker process, after the fork.
using HandlerFactory = std::function<HandlerPtr()>;

} // namespace fcgi_host
