#pragma once
// The connections a worker holds, indexed by fd: lookup, add, remove, and the sweeps over all
// of them (deadlines, eviction, handing off). It owns the Connection objects, and closes the
// fd of any connection still in it when it goes. Who closes a connection's fd during the
// worker's life is the event loop's business: remove() only forgets it (closed, or handed off).
//
// Closed connections are kept for the next ones, buffers and all, so that a connection per
// request (nginx's default) allocates nothing once the buffers have grown.
#include "fcgi_host/worker/connection.hpp"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace fcgi_host {

class ConnectionTable {
public:
  ConnectionTable(const RequestLimits& limits, const ServerValues& values)
      : limits_(limits), values_(values) {}
  ~ConnectionTable();
  ConnectionTable(const ConnectionTable&) = delete;
  ConnectionTable& operator=(const ConnectionTable&) = delete;

  // The connection on this fd, or nullptr.
  Connection* find(int fd) const {
    return static_cast<std::size_t>(fd) < by_fd_.size() ? by_fd_[fd].get() : nullptr;
  }
  // A new connection on `fd` (accepted, or taken over at `now`); the caller made room first.
  Connection& add(int fd, std::uint64_t now);
  // Forgets `c` (its fd is closed or handed off): `c` is gone after.
  void remove(Connection& c);

  std::size_t open() const { return open_; }

  // Calls f(Connection&) for every connection held; f may remove the one it is given (and no
  // other), but not add one.
  // In the order of their fds.
  template <class F> void for_each(F&& f) {
    for (std::size_t i = scan_begin_; i < scan_end_; ++i)
      if (Connection* c = by_fd_[i].get()) f(*c);
  }

private:
  void narrow_scan();

  const RequestLimits& limits_;
  const ServerValues& values_;
  std::vector<std::unique_ptr<Connection>> by_fd_;
  std::vector<std::unique_ptr<Connection>> spares_;
  // The sweeps run over [scan_begin_, scan_end_): from the lowest fd held to one past the
  // highest, not over the whole table. The worker's own fds (listening socket, epoll, signalfd,
  // logs, ...) come below its connections', and two sweeps per wait over them cost more than the
  // rest of the deadline code with one connection open. Empty: both 0.
  std::size_t scan_begin_ = 0;
  std::size_t scan_end_ = 0;
  std::size_t open_ = 0;
};

} // namespace fcgi_host
