#pragma once
// Request ids a worker makes up for requests that carry none (no X-Request-Id, no traceparent):
// a random prefix drawn once per worker at boot and the worker's request number, as 32 hex digits
// (the shape of nginx's $request_id, and a valid W3C trace id). Nothing is drawn or formatted per
// request: the worker stores the number, and whoever needs the text (an access-log line, the
// status page, the master's crash block) formats it. Formatting is plain arithmetic: safe in a
// signal handler.
#include <cstddef>
#include <cstdint>

namespace process_manager {

inline constexpr std::size_t kGeneratedIdSize = 32;

// Writes exactly kGeneratedIdSize hex digits (no terminator).
inline void format_generated_id(std::uint64_t prefix, std::uint64_t number, char* out) {
  constexpr char kHex[] = "0123456789abcdef";
  for (int i = 15; i >= 0; --i, prefix >>= 4)
    out[i] = kHex[prefix & 15];
  for (int i = 31; i >= 16; --i, number >>= 4)
    out[i] = kHex[number & 15];
}

// Eight random bytes (getrandom), never 0; once per worker.
std::uint64_t random_id_prefix();

} // namespace process_manager
