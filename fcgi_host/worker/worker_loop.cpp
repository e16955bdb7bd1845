// The worker's event loop: wait, dispatch, and the few steps around them.
//
// Design, and why:
//  - Every worker accepts on the one shared listening socket (non-blocking; in epoll with
//    EPOLLEXCLUSIVE, so a new connection wakes one idle worker, not all of them).
//  - Reading is non-blocking and event-driven: each connection has its own buffer, and the
//    record guard frames and checks every record as it arrives (connection_events.cpp). A
//    request reaches the codec and the handler only when it is complete (BEGIN, PARAMS, the
//    whole STDIN), so a slow or idle client never holds a worker: it is one more fd in epoll,
//    with its deadline (connection_policy.hpp).
//  - A complete request is served on a lane by one set of steps (serve_request.cpp): with one
//    thread the handler runs inline, one request at a time per worker (the prefork model);
//    with --threads it runs on the lane's thread while the loop goes on (threaded_requests.cpp).
//    A response complete in memory that the client does not take at once waits in the
//    connection's backlog and goes out from this loop.
//  - Kept connections (nginx `fastcgi_keep_conn on`) stay in epoll between requests, beside the
//    listening socket, so an idle kept connection never stops this worker from taking a new
//    connection. When this worker cannot serve them soon (a slow handler, a stop) they move to
//    a free worker (handoff_channel.hpp, worker_handoff.cpp).
//  - Fast path: with no connection open, the worker loops on accept4 and only waits in
//    epoll_wait when the listen queue is empty (and for a while after it found it empty:
//    accept_probe.hpp). A request under load then costs accept4, one read, one write and
//    close: four system calls, no clock system call (CLOCK_MONOTONIC is vDSO), no allocation
//    once the buffers have grown, no log formatting.
//  - Signals never interrupt a handler (worker_signals.hpp); the fast path, which does not
//    wait in epoll, looks at sigpending() every few accepts.
#include "fcgi_host/worker/worker_loop.hpp"

#include "app/host_access.hpp"
#include "fcgi_host/observe/access_log.hpp"
#include "fcgi_host/sys_error.hpp"
#include "fcgi_host/worker/handed_logs.hpp"
#include "process_manager/clock.hpp"
#include "process_manager/crash_report.hpp"
#include "process_manager/exit_codes.hpp"
#include "process_manager/log.hpp"
#include "process_manager/request_id.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <random>
#include <unistd.h>

namespace fcgi_host {

// Called from the crash handler (process_manager/crash_report.hpp): only reads the request and
// copies into the slot. The route is known to the worker alone (a Router sets it in handle()).
void describe_request_for_crash(process_manager::RequestSlot& slot, const app::Request& r) {
  // Again: with --metrics off the worker does not publish them per request.
  std::string_view method = r.method(), uri = r.uri();
  process_manager::Scoreboard::set_request(slot, method.data(), method.size(), uri.data(),
                                           uri.size(), r.carried_id());
  std::string_view route = r.route();
  std::size_t n = std::min(route.size(), sizeof slot.route - 1);
  for (std::size_t i = 0; i < n; ++i)
    slot.route[i] = route[i];
  slot.route[n] = '\0';
}

namespace {

void describe_for_crash(process_manager::WorkerSlot& slot, const void* request) {
  // (Busy in on_idle() is no request: the lane's request is an old one.)
  if (!process_manager::is_busy(slot.state.load(std::memory_order_relaxed)) ||
      slot.request(0).request_start_ns.load(std::memory_order_relaxed) == 0)
    return;
  describe_request_for_crash(slot.request(0), *static_cast<const app::Request*>(request));
}

// The request's generated id (process_manager/request_id.hpp), from its lane.
void lane_request_id(const void* lane, char* out) {
  auto& l = *static_cast<const Lane*>(lane);
  process_manager::format_generated_id(l.id_prefix, l.request_number, out);
}

using process_manager::LogLevel;
using process_manager::WorkerState;
namespace exit_code = process_manager::exit_code;

constexpr int kMaxEvents = 64;
constexpr unsigned kSignalCheckEvery = 32; // fast-path accepts between sigpending() calls

unsigned long random_up_to(unsigned long max) {
  if (max == 0) return 0;
  std::random_device seed;
  return std::uniform_int_distribution<unsigned long>(0, max)(seed);
}

} // namespace

WorkerLoop::WorkerLoop(const process_manager::WorkerContext& context,
                       const WorkerSettings& settings, app::Handler& handler,
                       const HandlerFactory* make_handler, bool thread_safe)
    : context_(context), slot_(context.slot), settings_(settings), handler_(handler),
      listen_fd_(settings.listen_fd), scoreboard_(context.scoreboard),
      slot_index_(context.slot_index), generation_(context.generation),
      host_(host_slot(context.scoreboard, context.slot_index)),
      queue_gate_(host_, settings.admission), policy_(settings.limits),
      write_timeout_ns_(policy_.write_timeout_ns()),
      table_(settings.limits.request, settings.server_values), access_log_(AccessLog::get()),
      make_handler_(make_handler), thread_safe_(thread_safe),
      request_timeout_ns_(settings.request_timeout_ns),
      event_heartbeat_ns_(settings.event_heartbeat_ns) {
  id_prefix_ = process_manager::random_id_prefix();
  slot_.id_prefix.store(id_prefix_, std::memory_order_relaxed);
  // One lane per handler thread; with one thread, one lane run inline, whose state is the
  // worker's own in the scoreboard (process_manager/scoreboard.hpp).
  const bool threaded = settings.threads > 1 && make_handler;
  publish_every_request_ = settings.observe.metrics || threaded;
  const std::size_t lanes = threaded ? settings.threads : 1;
  for (std::size_t i = 0; i < lanes; ++i) {
    process_manager::RequestSlot& rs = slot_.request(i);
    auto lane =
        std::make_unique<Lane>(i, rs, threaded ? rs.state : slot_.state, host_, settings.observe);
    lane->handler = &handler;
    lane->loop = this;
    lane->id_prefix = id_prefix_;
    lane->request.set_spill_threshold(settings.limits.spill_threshold);
    lane->response.set_file_offload(&settings.file_offload);
    lane->codec.set_head_limit(settings.max_response_head);
    app::HostAccess::set_id_source(lane->request, lane_request_id, lane.get());
    if (threaded) lane->metrics.measure_cpu_on_other_thread(); // the handler thread's CPU clock
    lanes_.push_back(std::move(lane));
  }
  lane_count_ = lanes_.size();
  if (!threaded && event_heartbeat_ns_ > 0) {
    heartbeat_ = std::make_unique<StreamHeartbeat>(*lanes_[0], event_heartbeat_ns_);
    lanes_[0]->heartbeat = heartbeat_.get();
  }
  process_manager::set_crash_describer(describe_for_crash, &lanes_[0]->request);
  // Each worker its own limit, so that workers started together do not all recycle together.
  if (settings.max_requests > 0)
    request_limit_ = settings.max_requests + random_up_to(settings.max_requests_jitter);
}

WorkerLoop::~WorkerLoop() {
  relay_.stop();
  process_manager::set_crash_describer(nullptr, nullptr);
  process_manager::set_crash_recorder(nullptr, nullptr);
  watch_.stop(); // before anything its thread may touch goes
}

// The worker's own resources. An error text when it cannot serve (the master logs it, once).
std::string WorkerLoop::setup() {
  // The signals first: from here on a stop sent to this worker waits in its signalfd.
  if (const char* call = nullptr; !signals_.open(call)) return sys_error(call, "worker");
  std::string error;
  if (!RequestCodec::init_library(error)) return error;
  if (error = arm_crash_capture(); !error.empty()) return error;
  if (!epoll_.ok()) return sys_error("epoll_create1", "worker");
  if (!epoll_.add(signals_.fd(), EPOLLIN)) return sys_error("epoll_ctl", "signalfd");
  set_accepting(true);
  watch_channel(true);
  if (settings_.handoff.enabled())
    watch_.start([this](std::uint64_t request_start_ns) { on_nudge(request_start_ns); });
  if (settings_.threads > 1 && make_handler_)
    if (error = start_threads(); !error.empty()) return error;
  if (settings_.idle_work_after_ns > 0 &&
      (!idle_timer_.start(settings_.idle_work_after_ns) || !epoll_.add(idle_timer_.fd(), EPOLLIN)))
    return sys_error("timerfd", "--idle-work-after");
  return {};
}

int WorkerLoop::run() {
  if (std::string error = setup(); !error.empty())
    return process_manager::boot_failure(context_, error);
  SlowHandlerWatch::Hold hold(watch_); // given up only while a handler runs (serve_request.cpp)
  slot_.ready_ns.store(process_manager::monotonic_ns(), std::memory_order_relaxed);
  slot_.state.store(WorkerState::Idle, std::memory_order_relaxed);
  // Logs rotated while this worker started (after Idle: the master hands them before it looks
  // whether to signal, so a rotation is either taken here or signalled).
  if (context_.log_channel >= 0) take_handed_logs(context_.log_channel);
  int code = exit_code::kWorkerDone;
  while (!done()) {
    if (look_at_signals_) {
      look_at_signals_ = false;
      if (signals_.pending()) take_signals();
    }
    if (recycle_if_due() || accept_without_waiting()) continue;
    if (!wait_and_dispatch()) {
      code = exit_code::kWorkerError;
      break;
    }
  }
  relay_.stop(); // (the loop is this thread's: the regent waits)
  return code;
}

// Here, at the top of the loop, not inside process(): stopping may close connections.
bool WorkerLoop::begin_recycling() {
  PM_LOG(LogLevel::Notice, std::string("worker recycling: ") + recycle_reason_);
  begin_stop(Stop::Quit);
  return true;
}

// Fast path: nothing open, so take the next queued connection without waiting in epoll, when
// the queue is likely to hold one (accept_probe.hpp). False: the loop waits.
bool WorkerLoop::accept_queued() {
  if (!accept_probe_.try_now()) return false;
  if (++accepts_since_signal_check_ >= kSignalCheckEvery) {
    accepts_since_signal_check_ = 0;
    if (signals_.pending()) {
      take_signals();
      return true;
    }
  }
  bool accepted = accept_one();
  accept_probe_.found(accepted);
  return accepted;
}

bool WorkerLoop::wait_and_dispatch() {
  epoll_event events[kMaxEvents];
  int n = epoll_.wait(events, kMaxEvents, next_timeout_ms());
  if (n < 0) {
    if (errno == EINTR) return true;
    PM_LOG(LogLevel::Alert, sys_error("epoll_wait", "worker"));
    return false;
  }
  for (int i = 0; i < n; ++i)
    dispatch(events[i].data.fd);
  const std::uint64_t now = process_manager::monotonic_ns(); // one read for what follows
  expire_deadlines(now);
  if (busy_lanes_ > 0) { // (a lane is busy here only on a handler thread)
    cut_overrun_requests(now);
    keep_streams_alive(now);
  }
  client_errors_.flush_due(now);
  if (!accepting_ && !stopping() && now >= accept_paused_until_ && admitting()) set_accepting(true);
  return true;
}

void WorkerLoop::dispatch(int fd) {
  if (fd == signals_.fd()) {
    take_signals();
  } else if (fd == listen_fd_) {
    if (accepting_) accept_one();
  } else if (fd == settings_.handoff.recv_fd) {
    if (watching_channel_) take_over_one();
  } else if (threads_ && fd == threads_->event_fd()) {
    on_thread_news();
  } else if (Connection* c = table_.find(fd)) {
    // (An fd handed off earlier in this batch may be empty now, or another connection.)
    on_ready(*c);
  } else if (fd == idle_timer_.fd()) { // (after the connections: no compare on their path)
    idle_timer_.take();
    look_at_idle_lanes(process_manager::monotonic_ns());
  }
}

// The wait's timeout: the nearest deadline. On the way, the scoreboard learns what the worker
// waits for: part of a request (reading), only kept connections (keep-alive idle), or nothing
// (idle). A waiting worker is free to take a new connection in all three.
int WorkerLoop::next_timeout_ms() {
  std::uint64_t earliest = 0;
  bool partial = false, kept = false;
  table_.for_each([&](const Connection& c) {
    if (!c.keeps_deadline()) return;
    if (earliest == 0 || c.deadline_ns < earliest) earliest = c.deadline_ns;
    partial |= c.phase == Connection::Phase::Reading && c.head_deadline_ns != 0;
    kept |= c.phase == Connection::Phase::KeptIdle;
  });
  if (busy_lanes_ > 0) { // requests on handler threads
    if (std::uint64_t due = next_lane_deadline(); due && (earliest == 0 || due < earliest))
      earliest = due;
  }
  // Every thread busy: the pool counts the worker busy. (One look at admitting() and one store:
  // this runs before every wait.)
  if (!stopping())
    slot_.state.store(!admitting() ? WorkerState::Handling
                      : partial    ? WorkerState::Reading
                      : kept       ? WorkerState::KeepAliveIdle
                                   : WorkerState::Idle,
                      std::memory_order_relaxed);
  if (accept_paused_until_ && !accepting_ && !stopping() &&
      (earliest == 0 || accept_paused_until_ < earliest))
    earliest = accept_paused_until_;
  if (std::uint64_t due = client_errors_.due_ns(); due && (earliest == 0 || due < earliest))
    earliest = due;
  if (earliest == 0) return -1;
  return ConnectionPolicy::wait_timeout_ms(earliest, process_manager::monotonic_ns());
}

void WorkerLoop::set_accepting(bool on) {
  if (on == accepting_) return;
  if (!on) {
    epoll_.remove(listen_fd_);
  } else if (!epoll_.add(listen_fd_, EPOLLIN | EPOLLEXCLUSIVE)) {
    PM_LOG(LogLevel::Error, sys_error("epoll_ctl", "listening socket"));
    return;
  }
  accepting_ = on;
}

void WorkerLoop::watch_channel(bool on) {
  if (!settings_.handoff.enabled() || on == watching_channel_) return;
  if (!on) {
    epoll_.remove(settings_.handoff.recv_fd);
  } else if (!epoll_.add(settings_.handoff.recv_fd, EPOLLIN | EPOLLEXCLUSIVE)) {
    PM_LOG(LogLevel::Error, sys_error("epoll_ctl", "handoff channel"));
    return;
  }
  watching_channel_ = on;
}

bool WorkerLoop::take_left_in_channel() {
  if (stop_ != Stop::Drain || !watching_channel_) return false;
  bool took = false;
  while (take_over_one())
    took = true;
  return took;
}

void WorkerLoop::take_signals() {
  while (int signo = signals_.take()) {
    switch (signo) {
    case SIGTERM:
      begin_stop(Stop::Drain);
      break;
    case SIGQUIT:
      begin_stop(Stop::Quit);
      break;
    case SIGUSR1:
      try {
        take_handed_logs(context_.log_channel);
      } catch (const std::exception& e) {
        PM_LOG(LogLevel::Error, e.what());
      }
      break;
    }
  }
}

void WorkerLoop::begin_stop(Stop how) {
  if (stopping()) return;
  stop_ = how;
  slot_.state.store(WorkerState::Stopping, std::memory_order_relaxed);
  if (how == Stop::Drain && accepting_) {
    // Serve what is already queued on the socket before leaving.
    while (accept_one()) {}
  }
  set_accepting(false);
  // The whole host stops, so no worker goes on to take what waits in the handoff channel: a
  // kept connection another worker passed on, seeing this one free just before it became busy,
  // with a request written on it. This worker takes them, now and until it leaves (another
  // worker's nudge may pass one on while this one stops), as it takes its queued connections.
  // Left there, they would close unanswered when the master exits (nginx: 502).
  if (how == Stop::Drain) take_left_in_channel();
  if (settings_.close_listen_fd_on_stop) {
    // Nothing more is accepted here: once every process has let go of the socket, the kernel
    // refuses new connections instead of queueing them for a reset at the last close.
    ::close(listen_fd_);
    listen_fd_ = -1;
  }
  if (how != Stop::Drain) watch_channel(false); // a retiring worker leaves them to those going on
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
  table_.for_each([&](Connection& c) {
    if (c.phase == Connection::Phase::KeptIdle)
      c.deadline_ns = ConnectionPolicy::stop_idle_deadline(now, c.deadline_ns);
  });
}

} // namespace fcgi_host
