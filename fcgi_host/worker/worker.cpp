// The worker loop.
//
// Design, and why:
//  - Every worker accepts on the one shared listening socket (non-blocking; in epoll with
//    EPOLLEXCLUSIVE, so a new connection wakes one idle worker, not all of them).
//  - Reading is non-blocking and event-driven: each connection has its own buffer, and the
//    record guard frames and checks every record as it arrives. A request reaches libfcgi and the
//    handler only when it is complete (BEGIN, PARAMS, the whole STDIN), so a slow or idle client
//    never holds a worker: it is one more fd in epoll, cut at --header-timeout or --body-timeout.
//  - The handler runs synchronously, one request at a time per worker (the prefork model). The
//    response is written with a bounded wait (--write-timeout) for a client that stopped reading.
//  - Kept connections (nginx `fastcgi_keep_conn on`) stay in epoll between requests, beside the
//    listening socket, so an idle kept connection never stops this worker from taking a new
//    connection; kept connections idle past --keepalive-timeout are closed.
//  - Fast path: with no connection open, the worker loops on accept4 and only waits in
//    epoll_wait when the listen queue is empty. A typical nginx request then costs accept4, one
//    read, one write and close: four system calls, no clock system call (CLOCK_MONOTONIC is
//    vDSO), no allocation once the buffers have grown, no log formatting.
//  - Signals never interrupt a handler: TERM, QUIT and USR1 stay blocked and are read from a
//    signalfd in epoll; the fast path looks at sigpending() every few accepts.
#include "fcgi_host/worker/worker.hpp"

#include "fcgi_host/observe/access_log.hpp"
#include "fcgi_host/observe/client_error_log.hpp"
#include "fcgi_host/observe/status_page.hpp"
#include "fcgi_host/protocol/byte_buffer.hpp"
#include "fcgi_host/protocol/libfcgi_io.hpp"
#include "fcgi_host/protocol/request_adapter.hpp"
#include "fcgi_host/worker/output_capture.hpp"
#include "process_manager/clock.hpp"
#include "process_manager/exit_codes.hpp"
#include "process_manager/log.hpp"

#include <arpa/inet.h>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <exception>
#include <fcgiapp.h>
#include <random>
#include <string>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>
#include <vector>

namespace fcgi_host {
namespace {

using process_manager::LogLevel;
using process_manager::WorkerState;
namespace exit_code = process_manager::exit_code;

constexpr int kMaxEvents = 64;
constexpr std::size_t kReadChunk = 16 * 1024;
constexpr std::size_t kShrinkAbove = 256 * 1024;
constexpr std::uint64_t kDrainNs = 2'000'000'000; // reading what a refused client still sends
constexpr unsigned kSignalCheckEvery = 32;        // fast-path accepts between sigpending() calls
constexpr std::uint64_t kAcceptPauseNs = 100'000'000; // after EMFILE and the like
// A stopping worker: how long a kept connection may rest before it is closed, and how long
// requests arriving on kept connections are still served.
constexpr std::uint64_t kStopIdleNs = 100'000'000;
constexpr std::uint64_t kStopServeNs = 3'000'000'000;

std::string peer_address(const sockaddr_storage& peer) {
  char text[INET6_ADDRSTRLEN] = "?";
  if (peer.ss_family == AF_INET)
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in&>(peer).sin_addr, text, sizeof text);
  else if (peer.ss_family == AF_INET6)
    inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6&>(peer).sin6_addr, text, sizeof text);
  return text;
}

std::uint64_t ns(std::chrono::milliseconds ms) {
  return static_cast<std::uint64_t>(ms.count()) * 1'000'000u;
}

unsigned long random_up_to(unsigned long max) {
  if (max == 0) return 0;
  std::random_device seed;
  return std::uniform_int_distribution<unsigned long>(0, max)(seed);
}

struct Connection {
  enum class Phase { Reading, KeptIdle, Draining };
  int fd = -1;
  Phase phase = Phase::Reading;
  bool in_epoll = false;
  bool head_started = false; // the header deadline runs
  std::uint64_t deadline_ns = 0;
  ByteBuffer in;
  RecordGuard guard;
  std::string replies;

  Connection(int fd, const GuardLimits& limits, const ServerValues& values)
      : fd(fd), guard(limits, values) {}
};

class Worker {
public:
  Worker(const process_manager::WorkerContext& context, const WorkerSettings& settings,
         app::Handler& handler)
      : slot_(context.slot), settings_(settings), handler_(handler),
        scoreboard_(context.scoreboard), slot_index_(context.slot_index),
        generation_(context.generation),
        metrics_(context.slot, context.scoreboard.routes(context.slot_index), settings.observe) {
    const Limits& l = settings.limits;
    guard_limits_.max_body = l.max_body;
    guard_limits_.max_params_size = l.max_params_size;
    guard_limits_.max_params = l.max_params;
    guard_limits_.max_records = l.max_records;
    write_timeout_ms_ = static_cast<int>(l.write_timeout.count());
    // Each worker its own limit, so that workers started together do not all recycle together.
    if (settings.max_requests > 0)
      request_limit_ = settings.max_requests + random_up_to(settings.max_requests_jitter);
  }

  ~Worker() {
    for (auto& c : connections_)
      if (c) ::close(c->fd);
    if (epoll_fd_ >= 0) ::close(epoll_fd_);
    if (signal_fd_ >= 0) ::close(signal_fd_);
  }

  int run();

private:
  enum class Stop { No, Drain, Quit };

  bool setup();
  bool wait_and_dispatch();
  bool accept_one();
  void set_accepting(bool on);
  void process(Connection& c);
  bool read_more(Connection& c);
  bool serve_request(Connection& c);
  void reject(Connection& c);
  void close_connection(Connection& c, const std::string& why = {});
  void watch(Connection& c);
  void expire_deadlines();
  int next_timeout_ms();
  void take_signals();
  void begin_stop(Stop how);
  bool finished() const { return stop_ != Stop::No && open_ == 0; }
  void count_request();
  void observe_request(std::uint64_t start, bool counted, bool streamed);

  process_manager::WorkerSlot& slot_;
  const WorkerSettings& settings_;
  app::Handler& handler_;
  const process_manager::Scoreboard& scoreboard_;
  std::size_t slot_index_;
  std::uint32_t generation_;
  RequestMetrics metrics_;
  GuardLimits guard_limits_;
  int write_timeout_ms_ = 30'000;

  int epoll_fd_ = -1;
  int signal_fd_ = -1;
  sigset_t signals_{};
  bool accepting_ = false; // the listening socket is in epoll
  std::uint64_t accept_paused_until_ = 0;
  Stop stop_ = Stop::No;
  std::uint64_t stop_serving_until_ = 0;
  unsigned accepts_since_signal_check_ = 0;
  unsigned long request_limit_ = 0; // 0: no --max-requests
  unsigned long served_ = 0;
  const char* recycle_reason_ = nullptr; // set after a request; acted on at the top of run()

  std::vector<std::unique_ptr<Connection>> connections_; // indexed by fd
  std::size_t open_ = 0;

  FCGX_Request fcgx_{};
  app::Request request_;
  app::Response response_;
  ClientErrorLog client_errors_;
};

bool Worker::setup() {
  // libfcgi installs handlers for SIGPIPE (ignore), SIGUSR1 and SIGTERM: ours come after.
  if (FCGX_Init() != 0) {
    PM_LOG(LogLevel::Alert, "FCGX_Init() failed");
    return false;
  }
  FCGX_InitRequest(&fcgx_, -1, 0);
  if (!libfcgi_io::self_test()) {
    PM_LOG(LogLevel::Alert, "libfcgi does not use the host's socket I/O (OS_Read/OS_Write were "
                            "not replaced); refusing to serve with libfcgi's own I/O");
    return false;
  }
  std::signal(SIGPIPE, SIG_IGN);
  std::signal(SIGHUP, SIG_IGN); // the master's signals, should one reach a worker
  std::signal(SIGTTIN, SIG_IGN);
  std::signal(SIGTTOU, SIG_IGN);
  std::signal(SIGUSR2, SIG_IGN);
  sigemptyset(&signals_);
  for (int s : {SIGTERM, SIGQUIT, SIGUSR1})
    sigaddset(&signals_, s);
  if (sigprocmask(SIG_BLOCK, &signals_, nullptr) != 0) return false;
  signal_fd_ = signalfd(-1, &signals_, SFD_NONBLOCK | SFD_CLOEXEC);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (signal_fd_ < 0 || epoll_fd_ < 0) {
    PM_LOG(LogLevel::Alert, std::string("worker setup failed: ") + std::strerror(errno));
    return false;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = signal_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, signal_fd_, &ev);
  set_accepting(true);
  return true;
}

int Worker::run() {
  if (!setup()) return exit_code::kWorkerBootFailure;
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
    PM_LOG(LogLevel::Alert, std::string("epoll_wait() failed: ") + std::strerror(errno));
    return false;
  }
  for (int i = 0; i < n; ++i) {
    int fd = events[i].data.fd;
    if (fd == signal_fd_) {
      take_signals();
    } else if (fd == settings_.listen_fd) {
      if (accepting_) accept_one();
    } else if (static_cast<std::size_t>(fd) < connections_.size() && connections_[fd]) {
      Connection& c = *connections_[fd];
      if (read_more(c)) process(c);
    }
  }
  expire_deadlines();
  if (std::uint64_t due = client_errors_.due_ns(); due && process_manager::monotonic_ns() >= due)
    client_errors_.flush();
  if (!accepting_ && stop_ == Stop::No && open_ < settings_.limits.max_connections &&
      process_manager::monotonic_ns() >= accept_paused_until_)
    set_accepting(true);
  return true;
}

void Worker::set_accepting(bool on) {
  if (on == accepting_) return;
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLEXCLUSIVE;
  ev.data.fd = settings_.listen_fd;
  epoll_ctl(epoll_fd_, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, settings_.listen_fd, &ev);
  accepting_ = on;
}

bool Worker::accept_one() {
  // The peer's address is asked for only when --allow-clients needs it.
  sockaddr_storage peer;
  socklen_t peer_len = sizeof peer;
  bool check = !settings_.allow_clients.allows_everyone();
  int fd = accept4(settings_.listen_fd, check ? reinterpret_cast<sockaddr*>(&peer) : nullptr,
                   check ? &peer_len : nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
  if (fd >= 0 && check && !settings_.allow_clients.allows(reinterpret_cast<sockaddr*>(&peer))) {
    client_errors_.write("refused a connection from " + peer_address(peer) +
                         ": not in --allow-clients");
    ::close(fd);
    return true;
  }
  if (fd < 0) {
    if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
      client_errors_.write(std::string("accept4() failed: ") + std::strerror(errno) +
                           "; pausing accepts for 100 ms");
      accept_paused_until_ = process_manager::monotonic_ns() + kAcceptPauseNs;
      set_accepting(false);
    }
    return false; // EAGAIN: another worker took it, or the queue is empty
  }
  if (static_cast<std::size_t>(fd) >= connections_.size()) connections_.resize(fd + 64);
  connections_[fd] = std::make_unique<Connection>(fd, guard_limits_, settings_.server_values);
  ++open_;
  slot_.accepted.store(slot_.accepted.load(std::memory_order_relaxed) + 1,
                       std::memory_order_relaxed); // one writer: no locked add
  if (open_ >= settings_.limits.max_connections) set_accepting(false);
  Connection& c = *connections_[fd];
  if (read_more(c)) process(c);
  return true;
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
      if (c.phase == Connection::Phase::Draining) c.in.size() = 0; // refused: discard
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

void Worker::process(Connection& c) {
  if (c.phase == Connection::Phase::Draining) return;
  for (;;) {
    RecordGuard::Verdict verdict = c.guard.advance(c.in.data(), c.in.size(), c.replies);
    if (!c.replies.empty()) {
      bool sent =
          libfcgi_io::write_all(c.fd, c.replies.data(), c.replies.size(), write_timeout_ms_);
      c.replies.clear();
      if (!sent) {
        close_connection(c);
        return;
      }
    }
    switch (verdict) {
    case RecordGuard::Verdict::RequestReady:
      if (!serve_request(c)) return; // closed
      // A stopping worker keeps serving its kept connections for a while (see begin_stop()),
      // then closes each after its response.
      if (stop_ != Stop::No && c.in.size() == 0 &&
          process_manager::monotonic_ns() >= stop_serving_until_) {
        close_connection(c);
        return;
      }
      continue; // a pipelined request may already be in the buffer
    case RecordGuard::Verdict::Reject:
      reject(c);
      return;
    case RecordGuard::Verdict::Close:
      close_connection(c, c.guard.close_reason());
      return;
    case RecordGuard::Verdict::NeedMore:
      watch(c);
      return;
    }
  }
}

// Waits in epoll for more of this connection's bytes, with the deadline of what it waits for.
void Worker::watch(Connection& c) {
  std::uint64_t now = process_manager::monotonic_ns();
  const Limits& l = settings_.limits;
  bool between_requests = c.in.size() == 0 && !c.guard.in_request();
  if (between_requests && c.phase == Connection::Phase::KeptIdle) {
    c.deadline_ns = now + (stop_ == Stop::No ? ns(l.keepalive_timeout) : kStopIdleNs);
  } else if (c.guard.params_done()) {
    c.phase = Connection::Phase::Reading; // each read of the body renews its deadline
    c.deadline_ns = now + ns(l.body_timeout);
  } else if (!c.head_started) {
    c.phase = Connection::Phase::Reading; // one deadline for the whole head
    c.head_started = true;
    c.deadline_ns = now + ns(l.header_timeout);
  }
  if (!c.in_epoll) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = c.fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c.fd, &ev);
    c.in_epoll = true;
  }
}

bool probe_aborted(void* context);

// Runs one complete request. False when the connection was closed.
bool Worker::serve_request(Connection& c) {
  RecordGuard& g = c.guard;
  if (g.aborted()) {
    // FCGI_ABORT_REQUEST before the handler ran: end the request without running it.
    records::append_end_request(c.replies, g.request_id(), 0, 0);
  } else {
    libfcgi_io::Source source;
    source.fd = c.fd;
    source.data = c.in.data() + g.request_begin();
    source.size = g.request_end() - g.request_begin();
    source.write_timeout_ms = write_timeout_ms_;
    libfcgi_io::attach(&source);
    fcgx_.ipcFd = c.fd;
    // FCGX_Accept_r starts by finishing the previous request, closing its fd unless kept: that
    // request is already finished, and the fd is now this connection's.
    fcgx_.keepConnection = 1;
    if (FCGX_Accept_r(&fcgx_) != 0) {
      libfcgi_io::detach();
      close_connection(c, "libfcgi refused a request the record guard accepted");
      return false;
    }
    bool whole = copy_request(fcgx_, g.body_size(), request_);
    request_.set_abort_probe(probe_aborted, &c);

    // Status and ping are answered here, before the handler, and are no request of the pool:
    // the slot stays idle, so the status page never counts itself as active.
    Endpoint endpoint =
        whole ? worker_endpoint(settings_.observe, request_.path()) : Endpoint::None;
    std::uint64_t start = process_manager::monotonic_ns();
    std::string_view method = request_.method(), uri = request_.uri();
    if (endpoint == Endpoint::None) {
      slot_.request_start_ns.store(start, std::memory_order_relaxed);
      if (settings_.observe.metrics)
        process_manager::Scoreboard::set_request(slot_, method.data(), method.size(), uri.data(),
                                                 uri.size());
      slot_.state.store(WorkerState::Handling, std::memory_order_relaxed);
      metrics_.begin(start);
    }

    StreamSink sink(fcgx_.out);
    response_.reset(&sink);
    if (!whole) {
      response_.status = 400;
      response_.set_content("Bad Request\n", "text/plain");
    } else if (endpoint != Endpoint::None) {
      bool allowed =
          remote_addr_allowed(settings_.observe.status_allow, request_.param("REMOTE_ADDR"));
      fill_response(answer_endpoint(endpoint, settings_.observe, scoreboard_, settings_.listen_fd,
                                    request_.query(), allowed),
                    response_);
    } else {
      // A handler's exception costs its request a 500 (unless the head already went out) and
      // one log line; the worker goes on.
      const char* failure = nullptr;
      std::string what;
      try {
        handler_.handle(request_, response_);
      } catch (const std::exception& e) {
        what = e.what();
        failure = what.c_str();
      } catch (...) {
        failure = "unknown exception";
      }
      if (failure) {
        client_errors_.write("handler failed on " + std::string(method) + " " + std::string(uri) +
                             ": " + failure);
        if (!response_.head_sent()) {
          response_.reset(&sink);
          response_.status = 500;
          response_.set_content("Internal Server Error\n", "text/plain");
        }
      }
    }
    bool streamed = response_.head_sent();
    if (endpoint == Endpoint::None)
      slot_.state.store(WorkerState::Writing, std::memory_order_relaxed);
    if (!streamed) write_response(response_, fcgx_.out);
    FCGX_Finish_r(&fcgx_); // flushes; without FCGI_KEEP_CONN it calls our OS_IpcClose
    libfcgi_io::detach();
    request_.set_abort_probe(nullptr, nullptr);
    observe_request(start, endpoint == Endpoint::None, streamed);
    if (endpoint == Endpoint::None) {
      slot_.request_start_ns.store(0, std::memory_order_relaxed);
      slot_.requests.fetch_add(1, std::memory_order_relaxed);
      slot_.state.store(WorkerState::Idle, std::memory_order_relaxed);
      count_request();
    }
    if (source.closed_by_libfcgi || source.write_failed) {
      close_connection(c);
      return false;
    }
  }
  bool keep = g.keep_connection();
  c.in.consume_front(g.request_end());
  g.consume_request();
  c.in.shrink_if_above(kShrinkAbove);
  if (!c.replies.empty()) {
    bool sent = libfcgi_io::write_all(c.fd, c.replies.data(), c.replies.size(), write_timeout_ms_);
    c.replies.clear();
    if (!sent) keep = false;
  }
  if (!keep) {
    close_connection(c);
    return false;
  }
  c.phase = Connection::Phase::KeptIdle;
  c.head_started = false;
  return true;
}

// Metrics, the slow log and the access log, after the response went out. Nothing here formats
// a line or reads a clock unless that feature is on.
void Worker::observe_request(std::uint64_t start, bool counted, bool streamed) {
  AccessLog& log = AccessLog::get();
  if (counted)
    metrics_.end(request_.path(), response_.status, request_.method(), request_.uri(),
                 log.enabled());
  if (!log.enabled()) return;
  AccessLog::Entry e;
  e.remote_addr = request_.param("REMOTE_ADDR");
  e.method = request_.method();
  e.uri = request_.uri();
  e.status = response_.status;
  e.duration_ns = counted ? metrics_.duration_ns() : process_manager::monotonic_ns() - start;
  e.cpu_ns = counted ? metrics_.cpu_ns() : -1;
  e.body_bytes = streamed ? -1 : static_cast<std::int64_t>(response_.body.size());
  e.pid = slot_.pid.load(std::memory_order_relaxed);
  e.slot = slot_index_;
  e.generation = generation_;
  log.write(e);
}

// Recycling checks after each request. ru_maxrss is one getrusage() (no file to open and parse,
// unlike /proc/self/statm), and is only asked for when --max-rss is set.
void Worker::count_request() {
  ++served_;
  if (request_limit_ && served_ >= request_limit_) {
    recycle_reason_ = "--max-requests reached";
  } else if (settings_.max_rss_kib > 0) {
    rusage ru{};
    if (getrusage(RUSAGE_SELF, &ru) == 0 && ru.ru_maxrss > settings_.max_rss_kib)
      recycle_reason_ = "peak RSS above --max-rss";
  }
}

// Request::aborted(): a non-blocking look at the connection for FCGI_ABORT_REQUEST or a close.
bool probe_aborted(void* context) {
  auto& c = *static_cast<Connection*>(context);
  if (c.guard.aborted()) return true;
  c.in.reserve_more(4096);
  ssize_t n = ::recv(c.fd, c.in.tail(), c.in.free_space(), MSG_DONTWAIT);
  if (n == 0) return true;
  if (n < 0) return errno != EAGAIN && errno != EINTR;
  c.in.size() += static_cast<std::size_t>(n);
  std::string replies;
  c.guard.advance(c.in.data(), c.in.size(), replies); // takes only an abort of this request
  c.replies += replies;
  return c.guard.aborted();
}

// Over a limit: answer with an error page, then read and discard what the client still sends
// (for up to 2 s) before closing, so that the answer is not lost to a reset.
void Worker::reject(Connection& c) {
  std::string page;
  records::append_error_response(page, c.guard.request_id(), c.guard.error_status());
  client_errors_.write("request refused with " + std::to_string(c.guard.error_status()) + ": " +
                       c.guard.close_reason());
  if (!libfcgi_io::write_all(c.fd, page.data(), page.size(), write_timeout_ms_)) {
    close_connection(c);
    return;
  }
  ::shutdown(c.fd, SHUT_WR);
  c.phase = Connection::Phase::Draining;
  c.in.size() = 0;
  c.deadline_ns = process_manager::monotonic_ns() + kDrainNs;
  if (!c.in_epoll) {
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.fd = c.fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c.fd, &ev);
    c.in_epoll = true;
  }
}

void Worker::close_connection(Connection& c, const std::string& why) {
  if (!why.empty()) client_errors_.write("closed FastCGI connection: " + why);
  int fd = c.fd;
  ::close(fd); // also removes it from epoll
  connections_[fd].reset();
  --open_;
  if (stop_ == Stop::No && !accepting_ && open_ < settings_.limits.max_connections &&
      process_manager::monotonic_ns() >= accept_paused_until_)
    set_accepting(true);
}

// The wait's timeout: the nearest connection deadline. On the way, the scoreboard learns what
// the worker waits for: part of a request (reading), only kept connections (keep-alive idle),
// or nothing (idle). A waiting worker is free to take a new connection in all three.
int Worker::next_timeout_ms() {
  std::uint64_t earliest = 0;
  bool partial = false, kept = false;
  for (auto& c : connections_) {
    if (!c || !c->in_epoll) continue;
    if (earliest == 0 || c->deadline_ns < earliest) earliest = c->deadline_ns;
    partial |= c->phase == Connection::Phase::Reading && c->head_started;
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
  for (auto& slot : connections_) {
    if (!slot || !slot->in_epoll || slot->deadline_ns > now) continue;
    Connection& c = *slot;
    switch (c.phase) {
    case Connection::Phase::KeptIdle:
      if (c.in.size() == 0 && !c.guard.in_request()) {
        close_connection(c);
        break;
      }
      [[fallthrough]];
    case Connection::Phase::Reading:
      close_connection(c, c.guard.params_done()
                              ? "body not received within --body-timeout"
                              : "request head not received within --header-timeout");
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
    int drained = 0;
    while (accept_one())
      ++drained;
    (void)drained;
  }
  set_accepting(false);
  // Kept connections are not closed at once: nginx may be writing a request on one right now,
  // and a request written to a connection we close is lost (nginx retries a GET, not a POST).
  // FastCGI has no way to tell nginx to stop using a connection, so a stopping worker closes a
  // kept connection once it has been idle for a moment: nginx reuses the most recently used
  // connection first, and notices the close of one resting in its cache. Connections that stay
  // busy are closed after a response once kStopServeNs has passed.
  std::uint64_t now = process_manager::monotonic_ns();
  stop_serving_until_ = now + kStopServeNs;
  for (auto& slot : connections_)
    if (slot && slot->phase == Connection::Phase::KeptIdle && slot->deadline_ns > now + kStopIdleNs)
      slot->deadline_ns = now + kStopIdleNs;
}

} // namespace

int run_worker(const process_manager::WorkerContext& context, const WorkerSettings& settings,
               const HandlerFactory& make_handler) {
  OutputCapture::attach(settings.output_fd);
  if (!drop_privileges(settings.credentials))
    return process_manager::boot_failure(context, std::string("could not drop privileges: ") +
                                                      std::strerror(errno));
  apply_environment(settings.clear_env, settings.env);
  HandlerPtr handler(nullptr, [](app::Handler*) {});
  try {
    handler = make_handler();
    handler->on_worker_start();
  } catch (const std::exception& e) {
    return process_manager::boot_failure(context, e.what()); // the master logs it, once
  }
  int code;
  {
    Worker worker(context, settings, *handler);
    code = worker.run();
  }
  try {
    handler->on_worker_stop();
  } catch (const std::exception& e) {
    PM_LOG(LogLevel::Error, std::string("on_worker_stop failed: ") + e.what());
  }
  return code;
}

} // namespace fcgi_host
