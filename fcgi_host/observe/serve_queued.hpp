#pragma once
// A socket the master serves from its own loop (the status socket, the health port): what is
// queued is accepted and answered in turn, each connection with a deadline of its own within a
// budget for the whole call, and closed after its answer. A slow or hostile client can delay a
// turn of the master loop by that much, never hold it.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <sys/socket.h>

namespace fcgi_host {

struct QueuedBudget {
  std::chrono::milliseconds total;
  std::chrono::milliseconds per_connection;
  int max_connections = 16; // answered per readiness
};

// Accepts from the non-blocking `listen_fd` until nothing is queued or the budget is spent, and
// hands each connection (non-blocking) to `serve` with its peer and deadline (CLOCK_MONOTONIC).
void serve_queued(int listen_fd, QueuedBudget budget,
                  const std::function<void(int fd, const sockaddr_storage& peer,
                                           std::uint64_t deadline_ns)>& serve);

// One read of such a connection: waits until it is readable or `deadline_ns` passes, then reads
// what it holds into `buf`. Returns the bytes read, 0 when none came (the caller looks at its
// deadline and may call again), -1 when the peer closed or the read failed.
long read_before(int fd, char* buf, std::size_t size, std::uint64_t deadline_ns);

} // namespace fcgi_host
