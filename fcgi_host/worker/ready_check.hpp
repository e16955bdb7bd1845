#pragma once
// The health gate (--ready-path): before a worker serves, its handler is asked for the ready
// path, in the worker itself, with the request a web server would send for `GET PATH`. Anything
// but a 2xx answer makes the worker a boot failure: at a start the master (or the pool) stops
// with that line, at a reload the new generation is abandoned and the old one keeps serving.
// Asked in-process, not through the listening socket, so that the answer is this worker's and
// never an old generation's.
#include "app/handler.hpp"

#include <string>

namespace fcgi_host {

// "" when `path` is empty or the handler answered 2xx; else why not, for the boot-failure line.
std::string ready_check(app::Handler& handler, const std::string& path);

} // namespace fcgi_host
