#pragma once
// app::WireParam: where one FastCGI param lies in the params as the web server sent them (the
// contents of the PARAMS records, one after the other): its name at `at`, its value right after
// the name. The host's one pass over the params (fcgi_host/protocol/param_scan.hpp) writes them,
// and app::Request reads its params through them in place (Request::set_wire_params): offsets
// rather than views, because the bytes may still move while the body arrives.
#include <cstddef>
#include <cstdint>

namespace app {

struct WireParam {
  std::size_t at = 0;
  std::uint32_t name_size = 0; // a FastCGI length field holds at most 2^31 - 1
  std::uint32_t value_size = 0;
};

} // namespace app
