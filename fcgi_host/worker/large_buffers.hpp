#pragma once
// Memory after a large request. The request and response bodies a worker reuses from request to
// request keep the capacity the largest request gave them, and glibc's malloc, once a large block
// has been freed, raises its mmap threshold (up to 32 MiB) so that later large blocks live on the
// heap, which stays resident after they are freed. Without the two calls below, one 8 MiB echo
// left a worker at ~19 MiB RSS for good (a pool of 15: ~285 MB after one such request each).
#include "app/request.hpp"
#include "app/response.hpp"

#include <cstddef>

namespace fcgi_host {

// From this size a buffer is large: it gets its own mapping, and is not kept after its request.
inline constexpr std::size_t kLargeBufferBytes = 256 * 1024;

// Once, at worker start: allocations of kLargeBufferBytes and more get their own mapping, which
// free() returns to the kernel at once (a fixed M_MMAP_THRESHOLD, which also turns off glibc's
// dynamic raise). Costs an mmap and a munmap per large allocation, i.e. only for large requests.
void return_large_allocations_when_freed();

// After each request: a request or response buffer that grew past kLargeBufferBytes is freed
// instead of kept for the next request, and a spilled body's temporary file is closed. A few
// compares on an ordinary request. Returns whether anything was released.
bool release_large_buffers(app::Request& request, app::Response& response);

} // namespace fcgi_host
