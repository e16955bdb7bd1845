#include "process_manager/request_id.hpp"

#include "process_manager/clock.hpp"

#include <sys/random.h>
#include <unistd.h>

namespace process_manager {

std::uint64_t random_id_prefix() {
  std::uint64_t prefix = 0;
  if (getrandom(&prefix, sizeof prefix, GRND_NONBLOCK) != static_cast<ssize_t>(sizeof prefix))
    prefix = monotonic_ns() * 0x9e3779b97f4a7c15u ^ static_cast<std::uint64_t>(getpid());
  return prefix != 0 ? prefix : 1;
}

} // namespace process_manager
