#pragma once
// Kept connections move between the workers of a pool: a worker that cannot serve a kept
// connection soon (it runs a slow handler, or it stops for a reload, an upgrade or recycling)
// passes the connection's fd, with the bytes it already read from it, to whichever worker is
// free. Every worker of every generation shares one SOCK_SEQPACKET socket pair made by the
// master before the first fork: one end to send on, the other watched by each waiting worker in
// epoll (EPOLLEXCLUSIVE, like the listening socket), so one free worker takes each connection.
// A connection moves only between two requests, or with its partial request in the message:
// no request is lost or answered twice, and FastCGI request ids stay with their connection.
#include <cstddef>
#include <string>
#include <string_view>

namespace fcgi_host {

// The most bytes of a partial request that travel with a connection.
inline constexpr std::size_t kMaxHandoffBytes = 60 * 1024;

// The channel's two ends. They are the master's (made before the first fork, handed across an
// upgrade), so nothing here closes them; every worker uses both.
struct HandoffChannel {
  int send_fd = -1;
  int recv_fd = -1;
  bool enabled() const { return send_fd >= 0 && recv_fd >= 0; }

  // Sends `fd` and the bytes read from it. False when the channel is full or fails: the caller
  // keeps the connection. The caller closes its own fd after a success.
  bool send(int fd, std::string_view buffered) const;

  // Takes one connection off the channel: its fd (close-on-exec, non-blocking) and its bytes.
  // -1 when none is waiting.
  int receive(std::string& buffered) const;

  // Takes every connection still waiting and closes it; how many there were. For the master
  // once its last worker is gone: nobody is left to take them.
  std::size_t close_waiting() const;
};

// The master's side: a non-blocking socket pair with room for many connections in flight.
// Throws StartupError on failure.
HandoffChannel make_handoff_channel();

} // namespace fcgi_host
