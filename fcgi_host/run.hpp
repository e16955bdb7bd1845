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

// Serves `handler` in every worker (each worker has its own copy, made by fork()).
int run(int argc, char** argv, app::Handler& handler);

// The stock executable: the handler is the one --app names (a built-in app or a plugin).
int run(int argc, char** argv);

} // namespace fcgi_host
