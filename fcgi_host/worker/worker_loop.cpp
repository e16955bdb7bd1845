// The worker loop.
//
// Design, and why:
//  - Every worker accepts on the one shared listening socket (non-blocking; in epoll with
//    EPOLLEXCLUSIVE, so a new connection wakes one idle worker, not all of them).
//  - Reading is non-blocking and event-driven: each connection has its own buffer, and the
//    record guard frames and checks every record as it arrives. A request reaches the codec and
//    the handler only when it is complete (BEGIN, PARAMS, the whole STDIN), so a slow or idle
//    client never holds a worker: it is one more fd in epoll, with a total deadline for the head
//    (--header-timeout) and for the body (--body-timeout plus --body-min-rate).
//  - The handler runs synchronously, one request at a time per worker (the prefork model). A
//    response complete in memory that the client does not take at once waits in the
//    connection's backlog and goes out from this loop; a streamed one waits for the client up
//    to its total deadline (--write-timeout).
//  - Under pressure (--max-connections reached, or --max-buffered bytes held) the worker closes
//    the connections that made the least progress instead of refusing new ones: a flood of idle
//    or trickling connections cannot lock out the web server.
//  - Kept connections (nginx `fastcgi_keep_conn on`) stay in epoll between requests, beside the
//    listening socket, so an idle kept connection never stops this worker from taking a new
//    connection. When this worker cannot serve them soon (a slow handler, a stop) they move to
//    a free worker (handoff.hpp, worker_handoff.cpp).
//  - Fast path: with no connection open, the worker loops on accept4 and only waits in
//    epoll_wait when the listen queue is empty. A typical nginx request then costs accept4, one
//    read, one write and close: four system calls, no clock system call (CLOCK_MONOTONIC is
//    vDSO), no allocation once the buffers have grown, no log formatting.
//  - Signals never interrupt a handler: TERM, QUIT and USR1 stay blocked and are read from a
//    signalfd in epoll; the fast path looks at sigpending() every few accepts.
#include "fcgi_host/worker/worker_loop.hpp"

#include "fcgi_host/net/socket_write.hpp"
#include "fcgi_host/observe/access_log.hpp"
#include "fcgi_host/sys_error.hpp"
#include "process_manager/clock.hpp"
#include "process_manager/crash_report.hpp"
#include "process_manager/exit_codes.hpp"
#include "process_manager/log.hpp"
#include "process_manager/request_id.hpp"

#include <algorithm>
#include <arpa/inet.h>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <random>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

namespace fcgi_host {
namespace {

// Called from the crash handler (process_manager/crash_report.hpp): only reads the request and
// copies into the slot. The route is known to the worker alone (a Router sets it in handle()).
void describe_for_crash(process_manager::WorkerSlot& slot, const void* request) {
  if (!process_manager::is_busy(slot.state.load(std::memory_order_relaxed))) return;
  const app::Request& r = *static_cast<const app::Request*>(request);
  // Again: with --metrics off the worker does not publish them per request.
  std::string_view method = r.method(), uri = r.uri();
  process_manager::Scoreboard::set_request(slot, method.data(), method.size(), uri.data(),
                                           uri.size(), r.carried_id());
  std::string_view route = r.route();
  std::size_t n = std::min(route.size(), sizeof slot.crash_route - 1);
  for (std::size_t i = 0; i < n; ++i)
    slot.crash_route[i] = route[i];
  slot.crash_route[n] = '\0';
}

using process_manager::LogLevel;
using process_manager::WorkerState;
namespace exit_code = process_manager::exit_code;
using Kind = ClientErrorLog::Kind;

constexpr int kMaxEvents = 64;
constexpr std::size_t kReadChunk = 16 * 1024;
constexpr std::uint64_t kDrainNs = 2'000'000'000; // reading what a refused client still sends
constexpr unsigned kSignalCheckEvery = 32;        // fast-path accepts between sigpending() calls
constexpr std::uint64_t kAcceptPauseNs = 100'000'000; // after EMFILE and the like
// A stopping worker with nobody to hand its kept connections to: how long one may rest before
// it is closed, and how long requests arriving on kept connections are still served.
constexpr std::uint64_t kStopIdleNs = 100'000'000;
constexpr std::uint64_t kStopServeNs = 3'000'000'000;
// Closed connections kept for reuse, and the largest buffers one may keep.
constexpr std::size_t kSpareConnections = 16;
constexpr std::size_t kSpareBufferBytes = 64 * 1024;
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

using process_manager::ns;

unsigned long random_up_to(unsigned long max) {
  if (max == 0) return 0;
  std::random_device seed;
  return std::uniform_int_distribution<unsigned long>(0, max)(seed);
}

} // namespace

Worker::Worker(const process_manager::WorkerContext& context, const WorkerSettings& settings,
               app::Handler& handler)
    : context_(context), slot_(context.slot), settings_(settings), handler_(handler),
      listen_fd_(settings.listen_fd), scoreboard_(context.scoreboard),
      slot_index_(context.slot_index), generation_(context.generation),
      metrics_(context.slot, context.scoreboard.routes(context.slot_index), settings.observe),
      queue_gate_(context.slot, settings.admission),
      write_timeout_ns_(ns(settings.limits.write_timeout)) {
  request_.set_spill_threshold(settings.limits.spill_threshold);
  id_prefix_ = process_manager::random_id_prefix();
  slot_.id_prefix.store(id_prefix_, std::memory_order_relaxed);
  request_.set_id_source(
      [](const void* w, char* out) {
        auto& self = *static_cast<const Worker*>(w);
        process_manager::format_generated_id(self.id_prefix_, self.request_number_, out);
      },
      this);
  process_manager::set_crash_describer(describe_for_crash, &request_);
  response_.set_file_offload(&settings.file_offload);
  codec_.set_head_limit(settings.max_response_head);
  // Each worker its own limit, so that workers started together do not all recycle together.
  if (settings.max_requests > 0)
    request_limit_ = settings.max_requests + random_up_to(settings.max_requests_jitter);
}

Worker::~Worker() {
  process_manager::set_crash_describer(nullptr, nullptr);
  process_manager::set_crash_recorder(nullptr, nullptr);
  stop_observer();
  for (auto& c : connections_)
    if (c) ::close(c->fd);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
  if (signal_fd_ >= 0) ::close(signal_fd_);
}

// The worker's own resources. An error text when it cannot serve (the master logs it, once).
std::string Worker::setup() {
  std::string error;
  if (!RequestCodec::init_library(error)) return error;
  if (error = arm_crash_capture(); !error.empty()) return error;
  std::signal(SIGPIPE, SIG_IGN);
  std::signal(SIGHUP, SIG_IGN); // the master's signals, should one reach a worker
  std::signal(SIGTTIN, SIG_IGN);
  std::signal(SIGTTOU, SIG_IGN);
  std::signal(SIGUSR2, SIG_IGN);
  sigemptyset(&signals_);
  for (int s : {SIGTERM, SIGQUIT, SIGUSR1})
    sigaddset(&signals_, s);
  if (pthread_sigmask(SIG_BLOCK, &signals_, nullptr) != 0) return sys_error("pthread_sigmask", "");
  signal_fd_ = signalfd(-1, &signals_, SFD_NONBLOCK | SFD_CLOEXEC);
  if (signal_fd_ < 0) return sys_error("signalfd", "worker");
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return sys_error("epoll_create1", "worker");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = signal_fd_;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, signal_fd_, &ev) != 0)
    return sys_error("epoll_ctl", "signalfd");
  set_accepting(true);
  watch_channel(true);
  start_observer();
  return {};
}

int Worker::run() {
  if (std::string error = setup(); !error.empty())
    return process_manager::boot_failure(context_, error);
  // The handler runs without this lock (serve_request.cpp); see worker_handoff.cpp.
  table_lock_.lock();
  struct Unlock {
    std::unique_lock<std::mutex>& lock;
    ~Unlock() { lock.unlock(); }
  } unlock_at_exit{table_lock_};
  slot_.state.store(WorkerState::Idle, std::memory_order_relaxed);
  while (!finished()) {
    if (recycle_reason_ && stop_ == Stop::No) { // not inside process(): it may close connections
      PM_LOG(LogLevel::Notice, std::string("worker recycling: ") + recycle_reason_);
      begin_stop(Stop::Quit);
      continue;
    }
    // Fast path: nothing open, so take the next queued connection without waiting.
    if (open_ == 0 && accepting_) {
      if (++accepts_since_signal_check_ >= kSignalCheckEvery) {
        accepts_since_signal_check_ = 0;
        sigset_t pending;
        if (sigpending(&pending) == 0 &&
            (sigismember(&pending, SIGTERM) || sigismember(&pending, SIGQUIT) ||
             sigismember(&pending, SIGUSR1))) {
          take_signals();
          continue;
        }
      }
      if (accept_one()) continue;
    }
    if (!wait_and_dispatch()) return exit_code::kWorkerError;
  }
  return exit_code::kWorkerDone;
}

bool Worker::wait_and_dispatch() {
  epoll_event events[kMaxEvents];
  int n = epoll_wait(epoll_fd_, events, kMaxEvents, next_timeout_ms());
  if (n < 0) {
    if (errno == EINTR) return true;
    PM_LOG(LogLevel::Alert, sys_error("epoll_wait", "worker"));
    return false;
  }
  for (int i = 0; i < n; ++i) {
    int fd = events[i].data.fd;
    if (fd == signal_fd_) {
      take_signals();
    } else if (fd == listen_fd_) {
      if (accepting_) accept_one();
    } else if (fd == settings_.handoff.recv_fd) {
      if (watching_channel_) take_over_one();
    } else if (static_cast<std::size_t>(fd) < connections_.size() && connections_[fd]) {
      // (An fd handed off earlier in this batch may be empty now, or another connection.)
      Connection& c = *connections_[fd];
      if (c.phase == Connection::Phase::Writing)
        continue_writing(c);
      else if (read_more(c))
        process(c);
    }
  }
  expire_deadlines();
  std::uint64_t now = process_manager::monotonic_ns();
  client_errors_.flush_due(now);
  if (!accepting_ && stop_ == Stop::No && now >= accept_paused_until_) set_accepting(true);
  return true;
}

void Worker::set_accepting(bool on) {
  if (on == accepting_) return;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLEXCLUSIVE;
  ev.data.fd = listen_fd_;
  if (epoll_ctl(epoll_fd_, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, listen_fd_, &ev) != 0 && on) {
    PM_LOG(LogLevel::Error, sys_error("epoll_ctl", "listening socket"));
    return;
  }
  accepting_ = on;
}

void Worker::watch_channel(bool on) {
  if (!settings_.handoff.enabled() || on == watching_channel_) return;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLEXCLUSIVE;
  ev.data.fd = settings_.handoff.recv_fd;
  if (epoll_ctl(epoll_fd_, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, settings_.handoff.recv_fd, &ev) !=
          0 &&
      on) {
    PM_LOG(LogLevel::Error, sys_error("epoll_ctl", "handoff channel"));
    return;
  }
  watching_channel_ = on;
}

Connection& Worker::add_connection(int fd, std::uint64_t now) {
  if (open_ >= settings_.limits.max_connections) make_room(now);
  if (static_cast<std::size_t>(fd) >= connections_.size()) connections_.resize(fd + 64);
  scan_end_ = std::max(scan_end_, static_cast<std::size_t>(fd) + 1);
  if (spare_connections_.empty()) {
    connections_[fd] =
        std::make_unique<Connection>(fd, settings_.limits.request, settings_.server_values, now);
  } else {
    connections_[fd] = std::move(spare_connections_.back());
    spare_connections_.pop_back();
    connections_[fd]->reuse(fd, now);
  }
  ++open_;
  publish_connections();
  return *connections_[fd];
}

bool Worker::accept_one() {
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
  process_manager::single_writer_add(slot_.accepted, 1);
  Connection& c = add_connection(fd, process_manager::monotonic_ns());
  if (read_more(c)) process(c);
  return true;
}

// A kept connection another worker could not serve soon: its bytes come with it.
void Worker::take_over_one() {
  int fd = receive_connection(settings_.handoff.recv_fd, handoff_bytes_);
  if (fd < 0) return;
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
}

// Reads what the socket has. False when the connection was closed (by the peer, or an error).
// One read per readiness: the record guard looks at every read before the buffer may grow
// again, so a client can never make a worker buffer more than the limits allow.
bool Worker::read_more(Connection& c) {
  for (;;) {
    c.in.reserve_more(kReadChunk);
    ssize_t n = ::read(c.fd, c.in.tail(), c.in.free_space());
    if (n > 0) {
      c.in.size() += static_cast<std::size_t>(n);
      c.bytes_in += static_cast<std::size_t>(n);
      if (c.phase == Connection::Phase::Draining) c.in.size() = 0; // refused: discard
      if (c.in.size() > kBudgetCheckAbove) {
        const int fd = c.fd;
        const Connection* self = &c;
        make_room(process_manager::monotonic_ns());
        if (connections_[fd].get() != self) return false; // it was the one evicted
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

void Worker::flush_replies(Connection& c) {
  if (c.replies.empty()) return;
  if (write_all(c.fd, c.replies.data(), c.replies.size(),
                static_cast<int>(write_timeout_ns_ / 1'000'000)))
    c.replies.clear();
}

void Worker::process(Connection& c) {
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
      if (stop_ != Stop::No && c.between_requests() && release_when_stopping(c, false)) return;
      continue; // a pipelined request may already be in the buffer
    case RecordGuard::Verdict::Reject:
      reject(c);
      return;
    case RecordGuard::Verdict::Close:
      close_connection(c, c.guard.close_reason());
      return;
    case RecordGuard::Verdict::NeedMore:
      // Also after a backlog went out, or with part of a request: a stopping worker's go on.
      if (stop_ != Stop::No && can_hand_off(false) && hand_off(c)) return;
      watch(c);
      return;
    }
  }
}

// Waits in epoll for more of this connection's bytes, with the deadline of what it waits for.
void Worker::watch(Connection& c) {
  std::uint64_t now = process_manager::monotonic_ns();
  const Limits& l = settings_.limits;
  if (c.between_requests() && c.phase == Connection::Phase::KeptIdle) {
    c.deadline_ns = now + (stop_ == Stop::No ? ns(l.keepalive_timeout) : kStopIdleNs);
  } else if (c.guard.params_done()) {
    // The body: at most --body-timeout between two reads, and a total that grows with what
    // arrived (--body-min-rate), so that a trickle is cut however steady it is.
    c.phase = Connection::Phase::Reading;
    if (c.body_start_ns == 0) c.body_start_ns = now;
    std::uint64_t earned = l.body_min_rate
                               ? c.guard.body_size() * 1'000'000'000ull / l.body_min_rate
                               : ns(l.body_timeout);
    c.deadline_ns =
        std::min(now + ns(l.body_timeout), c.body_start_ns + ns(l.body_timeout) + earned);
  } else {
    c.phase = Connection::Phase::Reading; // one deadline for the whole head
    if (c.head_deadline_ns == 0) c.head_deadline_ns = now + ns(l.header_timeout);
    c.deadline_ns = c.head_deadline_ns;
  }
  watch_readable(c);
}

// Puts the connection in epoll for reading, once. False when it could not be: then it is closed.
bool Worker::watch_readable(Connection& c) {
  if (c.in_epoll) return true;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = c.fd;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c.fd, &ev) != 0) {
    close_connection(c, sys_error("epoll_ctl", "connection"));
    return false;
  }
  c.in_epoll = true;
  return true;
}

void Worker::watch_for_write(Connection& c, bool on) {
  if (c.wants_write == on) return;
  epoll_event ev{};
  // Not EPOLLRDHUP while writing: a client that half-closed but still reads would make it fire
  // on every wait (level-triggered) while the socket is full. A gone client fails the write.
  ev.events = on ? EPOLLOUT : EPOLLIN | EPOLLRDHUP;
  ev.data.fd = c.fd;
  if (epoll_ctl(epoll_fd_, c.in_epoll ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, c.fd, &ev) != 0) {
    close_connection(c, sys_error("epoll_ctl", "connection"));
    return;
  }
  c.in_epoll = true;
  c.wants_write = on;
}

// A buffered response that the client reads slowly: more of it, as the socket takes it.
void Worker::continue_writing(Connection& c) {
  long n = write_some(c.fd, c.backlog.data(), c.backlog.size());
  if (n < 0) {
    close_connection(c);
    return;
  }
  c.backlog.erase(0, static_cast<std::size_t>(n));
  if (!c.backlog.empty()) return;
  std::string().swap(c.backlog); // give the memory back
  watch_for_write(c, false);
  if (!connections_[c.fd] || !c.keep_after_write) {
    if (connections_[c.fd]) close_connection(c);
    return;
  }
  c.phase = Connection::Phase::KeptIdle;
  process(c); // a pipelined request may wait in the buffer
}

// Over a limit: answer with an error page, then read and discard what the client still sends
// (for up to 2 s) before closing, so that the answer is not lost to a reset.
void Worker::reject(Connection& c) {
  std::string page;
  records::append_error_response(page, c.guard.request_id(), c.guard.error_status());
  client_errors_.write(Kind::Request, "request refused with " +
                                          std::to_string(c.guard.error_status()) + ": " +
                                          c.guard.close_reason());
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

void Worker::close_connection(Connection& c, const std::string& why) {
  if (!why.empty()) client_errors_.write(Kind::Connection, "closed FastCGI connection: " + why);
  ::close(c.fd); // also takes it out of epoll: no other process holds this description
  forget_connection(c);
}

// Drops the connection from the table (its fd is closed or handed off). `c` is gone after.
void Worker::forget_connection(Connection& c) {
  int fd = c.fd;
  if (spare_connections_.size() < kSpareConnections && c.in.capacity() <= kSpareBufferBytes &&
      c.backlog.capacity() <= kSpareBufferBytes) {
    if (spare_connections_.capacity() == 0) spare_connections_.reserve(kSpareConnections);
    spare_connections_.push_back(std::move(connections_[fd]));
  } else {
    connections_[fd].reset();
  }
  --open_;
  publish_connections();
}

void Worker::publish_connections() {
  slot_.connections.store(static_cast<std::uint32_t>(open_), std::memory_order_relaxed);
}

// Under pressure: closes the connection that made the least progress (the fewest bytes in; of
// those, the oldest), until there is room for one more connection and the buffered bytes are
// within --max-buffered. A connection whose response is being written is left alone.
void Worker::make_room(std::uint64_t now) {
  for (;;) {
    std::size_t buffered = 0;
    Connection* victim = nullptr;
    for (auto& slot : connections_) {
      if (!slot) continue;
      Connection& c = *slot;
      buffered += c.in.capacity() + c.backlog.capacity(); // memory held, not just bytes
      if (c.phase == Connection::Phase::Writing || c.fd == serving_fd_) continue;
      // Progress per second alive; integer maths, no clock read per connection.
      std::uint64_t age_ms = (now - c.started_ns) / 1'000'000 + 1;
      std::uint64_t rate = c.bytes_in * 1000 / age_ms;
      if (!victim || rate < victim->bytes_in * 1000 / ((now - victim->started_ns) / 1'000'000 + 1))
        victim = &c;
    }
    bool full = open_ >= settings_.limits.max_connections;
    bool over_budget = buffered > settings_.limits.max_buffered;
    if ((!full && !over_budget) || !victim) return;
    close_connection(*victim, full ? "evicted: --max-connections reached and it made the least "
                                     "progress"
                                   : "evicted: --max-buffered reached and it made the least "
                                     "progress");
  }
}

// The wait's timeout: the nearest connection deadline. On the way, the scoreboard learns what
// the worker waits for: part of a request (reading), only kept connections (keep-alive idle),
// or nothing (idle). A waiting worker is free to take a new connection in all three.
int Worker::next_timeout_ms() {
  std::uint64_t earliest = 0;
  bool partial = false, kept = false;
  for (std::size_t i = 0; i < scan_end_; ++i) {
    const Connection* c = connections_[i].get();
    if (!c || !c->in_epoll) continue;
    if (earliest == 0 || c->deadline_ns < earliest) earliest = c->deadline_ns;
    partial |= c->phase == Connection::Phase::Reading && c->head_deadline_ns != 0;
    kept |= c->phase == Connection::Phase::KeptIdle;
  }
  if (stop_ == Stop::No)
    slot_.state.store(partial ? WorkerState::Reading
                      : kept  ? WorkerState::KeepAliveIdle
                              : WorkerState::Idle,
                      std::memory_order_relaxed);
  if (accept_paused_until_ && !accepting_ && stop_ == Stop::No &&
      (earliest == 0 || accept_paused_until_ < earliest))
    earliest = accept_paused_until_;
  if (std::uint64_t due = client_errors_.due_ns(); due && (earliest == 0 || due < earliest))
    earliest = due;
  if (earliest == 0) return -1;
  std::uint64_t now = process_manager::monotonic_ns();
  if (earliest <= now) return 0;
  return static_cast<int>((earliest - now) / 1'000'000 + 1);
}

void Worker::expire_deadlines() {
  std::uint64_t now = process_manager::monotonic_ns();
  for (std::size_t i = 0; i < scan_end_; ++i) {
    Connection* slot = connections_[i].get();
    if (!slot || !slot->in_epoll || slot->deadline_ns > now) continue;
    Connection& c = *slot;
    switch (c.phase) {
    case Connection::Phase::KeptIdle:
      if (c.between_requests()) {
        if (stop_ == Stop::No)
          close_connection(c); // --keepalive-timeout
        else if (!release_when_stopping(c, true))
          c.deadline_ns = now + kStopIdleNs; // the next try
        break;
      }
      [[fallthrough]];
    case Connection::Phase::Reading:
      close_connection(c, c.guard.params_done()
                              ? "body not received within --body-timeout (and --body-min-rate)"
                              : "request head not received within --header-timeout");
      break;
    case Connection::Phase::Writing:
      close_connection(c, "the client did not read the response within --write-timeout");
      break;
    case Connection::Phase::Draining:
      close_connection(c);
      break;
    }
  }
}

void Worker::take_signals() {
  signalfd_siginfo info;
  while (::read(signal_fd_, &info, sizeof info) == sizeof info) {
    switch (info.ssi_signo) {
    case SIGTERM:
      begin_stop(Stop::Drain);
      break;
    case SIGQUIT:
      begin_stop(Stop::Quit);
      break;
    case SIGUSR1:
      try {
        process_manager::Log::get().reopen();
        AccessLog::get().reopen();
      } catch (const std::exception& e) {
        PM_LOG(LogLevel::Error, e.what());
      }
      break;
    }
  }
}

void Worker::begin_stop(Stop how) {
  if (stop_ != Stop::No) return;
  stop_ = how;
  slot_.state.store(WorkerState::Stopping, std::memory_order_relaxed);
  if (how == Stop::Drain && accepting_) {
    // Serve what is already queued on the socket before leaving.
    while (accept_one()) {}
  }
  set_accepting(false);
  if (settings_.close_listen_fd_on_stop) {
    // Nothing more is accepted here: once every process has let go of the socket, the kernel
    // refuses new connections instead of queueing them for a reset at the last close.
    ::close(listen_fd_);
    listen_fd_ = -1;
  }
  watch_channel(false);
  // Kept connections are not closed: nginx may be writing a request on one right now, and a
  // request written to a connection we close is lost (nginx retries a GET, not a POST). They
  // move to a worker that goes on (the new generation on a reload, the new master's workers
  // after an upgrade, the replacement when recycling; release_when_stopping()). With nobody to
  // take them (the whole host stops), a kept connection is closed once it has been idle for a
  // moment with nothing waiting in it: nginx reuses the most recently used connection first,
  // and notices the close of one resting in its cache. Connections that stay busy are closed
  // after a response, with nothing waiting, once kStopServeNs has passed.
  if (can_hand_off(false)) hand_off_waiting(-1);
  std::uint64_t now = process_manager::monotonic_ns();
  stop_serving_until_ = now + kStopServeNs;
  for (auto& slot : connections_)
    if (slot && slot->phase == Connection::Phase::KeptIdle && slot->deadline_ns > now + kStopIdleNs)
      slot->deadline_ns = now + kStopIdleNs;
}

} // namespace fcgi_host
