#pragma once
// One client connection held by a worker: its socket, the bytes read and not yet served, the
// record guard's view of them, and what the worker waits for on it.
#include "fcgi_host/protocol/byte_buffer.hpp"
#include "fcgi_host/protocol/record_guard.hpp"
#include "fcgi_host/worker/body_pump.hpp"

#include <cstdint>
#include <memory>
#include <string>

namespace fcgi_host {

struct Connection {
  enum class Phase {
    Reading,  // a request is on its way (or nothing arrived yet on a new connection)
    KeptIdle, // between requests on a kept connection
    Writing,  // a response waits in `backlog` for a client that reads slowly
    Draining, // refused: reading and discarding what the client still sends, then closing
    // --threads: a complete request waits for a free handler thread, or a handler thread serves
    // it; the connection stays in epoll, unwatched for deadlines (an event takes it out until
    // the lane is done), but while the lane's response waits for the socket.
    Queued,
    Serving,
  };
  int fd = -1;
  Phase phase = Phase::Reading;
  bool in_epoll = false;
  bool wants_write = false; // registered for EPOLLOUT (Writing, or a thread's output waiting)
  bool keep_after_write = false;
  bool body_mode_asked = false;  // the handler was asked whether it streams this request's body
  int lane = -1;                 // Serving: the handler thread's lane
  std::uint64_t deadline_ns = 0; // of what the worker waits for now
  std::uint64_t head_deadline_ns = 0; // 0 until the first byte of a request: then the total
                                      // deadline of its head (--header-timeout)
  std::uint64_t body_start_ns = 0;    // when the params ended: the body's deadline counts from it
  std::uint64_t started_ns = 0;       // accepted (or taken over)
  std::uint64_t bytes_in = 0;         // everything read: the measure of progress for eviction
  ByteBuffer in;
  RecordGuard guard;
  std::string replies; // management answers the guard produced, not yet sent
  std::string backlog; // the unsent rest of a buffered response
  // A large body read straight into its storage while it arrives (body_pump.hpp); null
  // otherwise. While it is set, `in` holds the request's head and is not read into.
  std::unique_ptr<BodyPump> pump;

  Connection(int fd, const RequestLimits& limits, const ServerValues& values, std::uint64_t now)
      : fd(fd), started_ns(now), guard(limits, values) {}

  // A closed connection's object for a new one: everything as new but the buffers' capacity.
  void reuse(int new_fd, std::uint64_t now) {
    fd = new_fd;
    phase = Phase::Reading;
    in_epoll = wants_write = keep_after_write = body_mode_asked = false;
    lane = -1;
    deadline_ns = head_deadline_ns = body_start_ns = 0;
    started_ns = now;
    bytes_in = 0;
    in.size() = 0;
    guard.reset();
    replies.clear();
    backlog.clear();
    pump.reset();
  }

  bool between_requests() const { return in.size() == 0 && !guard.in_request(); }
  // Its deadline_ns is one the loop keeps: not while its request waits for a thread or a thread
  // serves it (then only while the response waits for the client: --write-timeout).
  // (The time first: on every wait it is the cheaper look, and mostly false.)
  bool deadline_due(std::uint64_t now) const { return deadline_ns <= now && keeps_deadline(); }
  bool keeps_deadline() const {
    return in_epoll && ((phase != Phase::Serving && phase != Phase::Queued) || wants_write);
  }
};

} // namespace fcgi_host
