// What one connection's events do in the worker's loop: a connection is accepted (or taken
// over from another worker), read into its buffer, framed and checked by its record guard,
// served when a request is whole (serve_request.cpp), left waiting in epoll with a deadline
// (connection_policy.hpp) while it needs more, written to while a slow client takes a buffered
// response, refused with an error page, and closed: at its deadline, by its peer, or to make
// room under pressure.
#include "fcgi_host/worker/worker_loop.hpp"

#include "fcgi_host/net/plain_syscalls.hpp"
#include "fcgi_host/net/socket_write.hpp"
#include "fcgi_host/sys_error.hpp"
#include "process_manager/clock.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <sys/socket.h>
#include <unistd.h>

namespace fcgi_host {
namespace {

using Kind = ClientErrorLog::Kind;

constexpr std::size_t kReadChunk = 16 * 1024;
constexpr std::uint64_t kAcceptPauseNs = 100'000'000; // after EMFILE and the like
// The budget of buffered bytes is looked at only once a connection holds this much.
constexpr std::size_t kBudgetCheckAbove = 64 * 1024;

std::string peer_address(const sockaddr_storage& peer) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (peer.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(peer).sin_addr, text, sizeof text);
  else if (peer.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(peer).sin6_addr, text, sizeof text);
  return text;
}

} // namespace

bool WorkerLoop::accept_one() {
  // The peer's address is asked for only when --allow-clients needs it.
  sockaddr_storage peer;
  socklen_t peer_len = sizeof peer;
  bool check = !settings_.allow_clients.allows_everyone();
  int fd = accept4(listen_fd_, check ? reinterpret_cast<sockaddr*>(&peer) : nullptr,
                   check ? &peer_len : nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd >= 0 && check && !settings_.allow_clients.allows(reinterpret_cast<sockaddr*>(&peer))) {
    client_errors_.write(Kind::Connection, "refused a connection from " + peer_address(peer) +
                                               ": not in --allow-clients");
    ::close(fd);
    return true;
  }
  if (fd < 0) {
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
      client_errors_.write(Kind::Accept, sys_error("accept4", "listening socket") +
                                             "; pausing accepts for 100 ms");
      accept_paused_until_ = process_manager::monotonic_ns() + kAcceptPauseNs;
      set_accepting(false);
    }
    return false; // EAGAIN: another worker took it, or the queue is empty
  }
  process_manager::single_writer_add(host_.accepted, 1);
  Connection& c = add_connection(fd, process_manager::monotonic_ns());
  if (read_more(c)) process(c);
  return true;
}

// A kept connection another worker could not serve soon: its bytes come with it. False when
// none was waiting.
bool WorkerLoop::take_over_one() {
  int fd = settings_.handoff.receive(handoff_bytes_);
  if (fd < 0) return false;
  Connection& c = add_connection(fd, process_manager::monotonic_ns());
  if (!handoff_bytes_.empty()) {
    c.in.reserve_more(handoff_bytes_.size());
    std::memcpy(c.in.tail(), handoff_bytes_.data(), handoff_bytes_.size());
    c.in.size() += handoff_bytes_.size();
    c.bytes_in += handoff_bytes_.size();
  } else {
    c.phase = Connection::Phase::KeptIdle;
    c.bytes_in = 1; // it served requests before: more progress than a connection never used
  }
  if (read_more(c)) process(c);
  return true;
}

Connection& WorkerLoop::add_connection(int fd, std::uint64_t now) {
  if (policy_.full(table_.open())) make_room(now);
  Connection& c = table_.add(fd, now);
  publish_connections();
  return c;
}

// Drops the connection from the table (its fd is closed or handed off). `c` is gone after.
void WorkerLoop::forget_connection(Connection& c) {
  table_.remove(c);
  publish_connections();
}

// Reads what the socket has. False when the connection was closed (by the peer, or an error).
// One read per readiness: the record guard looks at every read before the buffer may grow
// again, so a client can never make a worker buffer more than the limits allow.
bool WorkerLoop::read_more(Connection& c) {
  for (;;) {
    c.in.reserve_more(kReadChunk);
    ssize_t n = plain::read(c.fd, c.in.tail(), c.in.free_space());
    if (n > 0) {
      c.in.size() += static_cast<std::size_t>(n);
      c.bytes_in += static_cast<std::size_t>(n);
      if (c.phase == Connection::Phase::Draining) c.in.size() = 0; // refused: discard
      if (c.in.size() > kBudgetCheckAbove) {
        const int fd = c.fd;
        const Connection* self = &c;
        make_room(process_manager::monotonic_ns());
        if (table_.find(fd) != self) return false; // it was the one evicted
      }
      return true;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return true;
    // End of input or an error. A web server that closes between requests is normal.
    bool mid_request = c.guard.in_request() && c.phase != Connection::Phase::Draining;
    close_connection(c, mid_request ? std::string("client closed the connection mid-request") : "");
    return false;
  }
}

void WorkerLoop::flush_replies(Connection& c) {
  if (c.replies.empty()) return;
  if (write_all(c.fd, c.replies.data(), c.replies.size(),
                static_cast<int>(write_timeout_ns_ / 1'000'000)))
    c.replies.clear();
}

void WorkerLoop::process(Connection& c) {
  if (c.phase == Connection::Phase::Draining || c.phase == Connection::Phase::Writing) return;
  for (;;) {
    RecordGuard::Verdict verdict = c.guard.advance(c.in.data(), c.in.size(), c.replies);
    flush_replies(c);
    if (!c.replies.empty()) {
      close_connection(c);
      return;
    }
    switch (verdict) {
    case RecordGuard::Verdict::RequestReady:
      if (!serve_request(c)) return;                     // closed, or moved
      if (c.phase == Connection::Phase::Writing) return; // continue_writing() goes on
      // A stopping worker passes its kept connections on (worker_handoff.cpp).
      if (stopping() && c.between_requests() && release_when_stopping(c, false)) return;
      continue; // a pipelined request may already be in the buffer
    case RecordGuard::Verdict::Reject:
      reject(c);
      return;
    case RecordGuard::Verdict::Close:
      close_connection(c, c.guard.close_reason());
      return;
    case RecordGuard::Verdict::NeedMore:
      if (!c.body_mode_asked && c.guard.params_done()) {
        c.body_mode_asked = true;
        Streamed streamed = serve_streamed(c);
        if (streamed == Streamed::Closed) return;
        if (streamed == Streamed::Served) {
          if (c.phase == Connection::Phase::Writing) return;
          if (stopping() && c.between_requests() && release_when_stopping(c, false)) return;
          continue;
        }
        if (start_pump(c)) {
          pump_body(c);
          return;
        }
      }
      // Also after a backlog went out, or with part of a request: a stopping worker's go on.
      if (stopping() && can_hand_off(false) && hand_off(c)) return;
      watch(c);
      return;
    }
  }
}

// Waits in epoll for more of this connection's bytes, with the deadline of what it waits for.
void WorkerLoop::watch(Connection& c) {
  std::uint64_t now = process_manager::monotonic_ns();
  if (c.between_requests() && c.phase == Connection::Phase::KeptIdle) {
    c.deadline_ns = policy_.next_request_deadline(now, stopping());
  } else if (c.guard.params_done()) {
    c.phase = Connection::Phase::Reading;
    if (c.body_start_ns == 0) c.body_start_ns = now;
    c.deadline_ns = policy_.body_deadline(now, c.body_start_ns,
                                          c.pump ? c.pump->body_size() : c.guard.body_size());
  } else {
    c.phase = Connection::Phase::Reading;
    if (c.head_deadline_ns == 0) c.head_deadline_ns = policy_.head_deadline(now);
    c.deadline_ns = c.head_deadline_ns;
  }
  watch_readable(c);
}

// Puts the connection in epoll for reading, once. False when it could not be: then it is closed.
bool WorkerLoop::watch_readable(Connection& c) {
  if (c.in_epoll) return true;
  if (!epoll_.add(c.fd, EPOLLIN | EPOLLRDHUP)) {
    close_connection(c, sys_error("epoll_ctl", "connection"));
    return false;
  }
  c.in_epoll = true;
  return true;
}

void WorkerLoop::watch_for_write(Connection& c, bool on) {
  if (c.wants_write == on) return;
  // Not EPOLLRDHUP while writing: a client that half-closed but still reads would make it fire
  // on every wait (level-triggered) while the socket is full. A gone client fails the write.
  std::uint32_t events = on ? EPOLLOUT : EPOLLIN | EPOLLRDHUP;
  if (!(c.in_epoll ? epoll_.modify(c.fd, events) : epoll_.add(c.fd, events))) {
    close_connection(c, sys_error("epoll_ctl", "connection"));
    return;
  }
  c.in_epoll = true;
  c.wants_write = on;
}

// A buffered response that the client reads slowly: more of it, as the socket takes it.
void WorkerLoop::continue_writing(Connection& c) {
  long n = write_some(c.fd, c.backlog.data(), c.backlog.size());
  if (n < 0) {
    close_connection(c);
    return;
  }
  c.backlog.erase(0, static_cast<std::size_t>(n));
  if (!c.backlog.empty()) return;
  std::string().swap(c.backlog); // give the memory back
  const int fd = c.fd;
  watch_for_write(c, false);
  if (!table_.find(fd) || !c.keep_after_write) {
    if (table_.find(fd)) close_connection(c);
    return;
  }
  c.phase = Connection::Phase::KeptIdle;
  process(c); // a pipelined request may wait in the buffer
}

// Over a limit: answer with an error page, then read and discard what the client still sends
// (for up to kDrainNs) before closing, so that the answer is not lost to a reset.
void WorkerLoop::reject(Connection& c) {
  reject(c, c.guard.error_status(), c.guard.close_reason());
}

void WorkerLoop::reject(Connection& c, int status, const std::string& reason) {
  c.pump.reset();
  std::string page;
  records::append_error_response(page, c.guard.request_id(), status);
  client_errors_.write(Kind::Request,
                       "request refused with " + std::to_string(status) + ": " + reason);
  if (!write_all(c.fd, page.data(), page.size(), static_cast<int>(write_timeout_ns_ / 1'000'000))) {
    close_connection(c);
    return;
  }
  ::shutdown(c.fd, SHUT_WR);
  c.phase = Connection::Phase::Draining;
  c.in.size() = 0;
  c.deadline_ns = process_manager::monotonic_ns() + kDrainNs;
  watch_readable(c);
}

// ---- a large body gathered as it arrives ------------------------------------------------------

namespace {
// Bodies with more than this still to come go straight into their storage (body_pump.hpp); a
// smaller rest is read into the connection's buffer with the request, as before.
constexpr std::size_t kPumpAbove = 64 * 1024;
} // namespace

bool WorkerLoop::start_pump(Connection& c) {
  RecordGuard& g = c.guard;
  const RequestFraming framing = g.framing();
  if (!framing.params || g.aborted() || framing.params->content_length < 0 ||
      static_cast<std::size_t>(framing.params->content_length) < g.body_size() + kPumpAbove)
    return false;
  const std::string_view buffered(c.in.data() + g.request_end(), c.in.size() - g.request_end());
  c.pump = std::make_unique<BodyPump>(c.fd,
                                      StdinStream::Start{g.request_id(), g.body_size(),
                                                         framing.params->content_length,
                                                         settings_.limits.request.max_body},
                                      buffered, settings_.limits.spill_threshold, upload_memory_);
  // The body's start, which the guard framed already, first.
  try {
    for (std::size_t at : framing.stdin_records) {
      const char* h = c.in.data() + g.request_begin() + at;
      c.pump->body().append(h + records::kHeaderSize, records::decode_header(h).content_length);
    }
  } catch (const std::exception&) {
    c.pump.reset(); // its temporary file failed: the body is gathered as before (and fails there)
    return false;
  }
  if (c.body_start_ns == 0) c.body_start_ns = process_manager::monotonic_ns();
  return true;
}

void WorkerLoop::pump_body(Connection& c) {
  if (!c.pump) return; // refused while it started
  const std::size_t before = c.pump->body_size();
  BodyPump::Result result;
  try {
    result = c.pump->pump();
  } catch (const std::exception& e) {
    reject(c, 500, std::string("the request body could not be stored: ") + e.what());
    return;
  }
  c.bytes_in += c.pump->body_size() - before;
  const BodySource& source = c.pump->source();
  switch (result) {
  case BodyPump::Result::NeedMore: {
    const int fd = c.fd;
    const Connection* self = &c;
    if (c.pump->memory() > kBudgetCheckAbove) make_room(process_manager::monotonic_ns());
    if (table_.find(fd) != self) return; // it was the one evicted
    watch(c);
    return;
  }
  case BodyPump::Result::Failed:
    if (source.aborted() || source.reason().find("closed the connection") != std::string::npos)
      close_connection(c, source.aborted() ? std::string() : source.reason());
    else
      reject(c, source.status(), source.reason());
    return;
  case BodyPump::Result::End:
    body_arrived(c, source.leftover());
    return;
  }
}

// The whole body is in: what was read past it goes back into the buffer after the request's
// head, and the request is served with the body the pump gathered.
void WorkerLoop::body_arrived(Connection& c, std::string_view leftover) {
  RecordGuard& g = c.guard;
  const std::size_t end = g.request_end();
  c.in.size() = end;
  c.in.reserve_more(leftover.size()); // in the buffer's own bytes past `end`, or the pump's
  std::memmove(c.in.data() + end, leftover.data(), leftover.size());
  c.in.size() = end + leftover.size();
  g.streamed_body();
  if (!serve_request(c)) return; // closed, or moved
  if (c.phase == Connection::Phase::Writing) return;
  if (stopping() && c.between_requests() && release_when_stopping(c, false)) return;
  process(c); // a pipelined request may already be in the buffer
}

void WorkerLoop::close_connection(Connection& c, const std::string& why) {
  if (!why.empty()) client_errors_.write(Kind::Connection, "closed FastCGI connection: " + why);
  ::close(c.fd); // also takes it out of epoll: no other process holds this description
  forget_connection(c);
}

// Under pressure: closes the connection that made the least progress, until there is room for
// one more connection and the buffered bytes are within --max-buffered (connection_policy.hpp).
void WorkerLoop::make_room(std::uint64_t now) {
  for (;;) {
    EvictionScan scan(now);
    table_.for_each([&](const Connection& c) {
      bool may_evict = c.phase != Connection::Phase::Writing && c.fd != serving_fd_ &&
                       c.phase != Connection::Phase::Serving &&
                       c.phase != Connection::Phase::Queued;
      scan.consider(c.fd, c.bytes_in, c.started_ns,
                    c.in.capacity() + c.backlog.capacity() + (c.pump ? c.pump->memory() : 0),
                    may_evict);
    });
    Pressure pressure = policy_.pressure(table_.open(), scan.buffered_bytes());
    if (pressure == Pressure::None || scan.victim_fd() < 0) return;
    close_connection(*table_.find(scan.victim_fd()), ConnectionPolicy::reason(pressure));
  }
}

void WorkerLoop::expire_deadlines(std::uint64_t now) {
  table_.for_each([&](Connection& c) {
    // (A handler thread's connection is in epoll only while its response waits for the client:
    // its deadline is --write-timeout's.)
    if (c.deadline_due(now)) {
      if (c.phase != Connection::Phase::Serving)
        on_deadline(c, now);
      else
        write_timed_out(c);
    }
  });
}

void WorkerLoop::on_deadline(Connection& c, std::uint64_t now) {
  Expiry e = ConnectionPolicy::on_deadline(c.phase, c.between_requests(), c.guard.params_done(),
                                           stopping());
  if (e != Expiry::ReleaseStopping) {
    const char* why = ConnectionPolicy::reason(e);
    close_connection(c, why ? why : "");
  } else if (!release_when_stopping(c, true)) {
    c.deadline_ns = now + kStopIdleNs; // the next try
  }
}

} // namespace fcgi_host
