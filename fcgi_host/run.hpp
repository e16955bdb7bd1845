#pragma once
// The entry points. A program with its own handler:
//
//   int main(int argc, char** argv) {
//     MyHandler handler;
//     return fcgi_host::run(argc, argv, handler);
//   }
//
// gets every option of the stock fcgi-host (--listen, --workers, --config, ...) but --app.
#include "app/handler.hpp"

namespace fcgi_host {

// Serves `handler` in every worker (each worker has its own copy, made by fork()). With
// --threads above 1 its threads would share that one object: refused at start (exit 2) unless
// the program says it is thread-safe with run_thread_safe(). A handler of which each thread
// needs an instance of its own is served as a plugin (FCGI_HOST_PLUGIN).
int run(int argc, char** argv, app::Handler& handler);
// The same, for a handler whose one object may serve every handler thread of a worker at once
// (it guards its own shared state).
int run_thread_safe(int argc, char** argv, app::Handler& handler);

// The stock executable: the handler is the one --app names (a built-in app or a plugin).
int run(int argc, char** argv);

} // namespace fcgi_host
