#include "fcgi_host/worker/large_buffers.hpp"

#include <malloc.h>
#include <string>

namespace fcgi_host {

void return_large_allocations_when_freed() {
  mallopt(M_MMAP_THRESHOLD, static_cast<int>(kLargeBufferBytes));
}

bool release_large_buffers(app::Request& request, app::Response& response) {
  bool released = request.release_large_buffers(kLargeBufferBytes);
  if (response.body.capacity() >= kLargeBufferBytes) {
    std::string().swap(response.body);
    released = true;
  }
  return released;
}

} // namespace fcgi_host
