#pragma once
// The apps built into the stock fcgi-host binary, chosen with --app NAME.
#include "app/handler.hpp"

#include <memory>
#include <string_view>

namespace app {

// `hello` answers "OK" to every request: the benchmark app.
std::unique_ptr<Handler> make_hello_app();
// `echo` reflects the request (method, URI, params, body); `delay_ms=N` in the query waits N ms
// (at most 60 000) first; /throw throws, /crash aborts the worker, /only-get takes GET only,
// /not-found answers 404.
std::unique_ptr<Handler> make_echo_app();
// nullptr when `name` is not a built-in app.
std::unique_ptr<Handler> make_builtin_app(std::string_view name);
bool is_builtin_app(std::string_view name);

} // namespace app
