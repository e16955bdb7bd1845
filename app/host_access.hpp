#pragma once
// The host's hooks into app::Request, kept out of the handler API: the params read in place off
// the wire, the fields the host's one pass found already, the abort probe and the request-id
// source. Only the host (fcgi_host/) and the tests that fill a Request as the host does include
// this header; a handler never needs it.
#include "app/request.hpp"

#include <cstddef>

namespace app {

struct HostAccess {
  using CoreParams = Request::CoreParams;

  // The params as the host found them on the wire, read in place: `count` params at `params`,
  // over the bytes at `base`, both valid while the request is served (a view per param, made
  // for every request, cost more than most handlers spend on their params). `skip`, 1 + an
  // index, leaves that one out (0: none). They come after the params added before this call
  // and before those added after it; one run per request.
  static void set_wire_params(Request& r, const char* base, const WireParam* params,
                              std::size_t count, std::size_t skip = 0) {
    r.set_wire_params(base, params, count, skip);
  }
  // finish_params() from what the host's one pass over the params found: each the last value of
  // its param, empty when absent.
  static void finish_params(Request& r, const CoreParams& core) { r.finish_params(core); }
  // A plain function and context rather than std::function: set once per request, never
  // allocates.
  static void set_abort_probe(Request& r, bool (*probe)(void*), void* context) {
    r.set_abort_probe(probe, context);
  }
  // The id request_id() makes up when the request carries none: `format(context, out)` writes
  // exactly 32 characters; called at most once per request, and only when someone asks.
  static void set_id_source(Request& r, void (*format)(const void* context, char* out),
                            const void* context) {
    r.set_id_source(format, context);
  }
};

} // namespace app
