// One complete request, on a lane (request_lane.hpp), in three steps written once for every
// --threads value (decision 21):
//   begin    (the loop)   decode into the lane, publish it to the slot, and answer what the host
//                         answers itself: a body it could not store (400), the status and ping
//                         pages, a request shed by --max-queue-time (503);
//   respond  (inline, or on the lane's thread)   the handler inside its exception boundary,
//                         then its response encoded, then the rest of a streamed body dropped;
//   finish   (the loop)   the lines its failures earn, observe (metrics, slow and access log),
//                         the slot, count, keep or close the connection.
// Response::finish() ends the response before the handler returns (end_response_early, where
// respond runs), and splits finish in its two parts: the connection's (keep or close: free for
// its next request) and the lane's (the rest, once the handler returned; decision 25). With
// --threads 1 the loop is the handler's until it returns: the connection's part runs at
// finish(), inside the handler (pass_on_finished_connection: to a free worker); with more, the
// loop lets the connection go as soon as it took the response's end (threaded_requests.cpp).
// Either way the lane stays busy until the handler returns.
// The modes part in one place, where respond runs (serve_request): inline with one thread, the
// codec writing straight to the socket; on the lane's thread with more (threaded_requests.cpp),
// its output coming back through the lane.
#include "app/host_access.hpp"
#include "fcgi_host/observe/access_log.hpp"
#include "fcgi_host/observe/queue_time.hpp"
#include "fcgi_host/observe/status_page.hpp"
#include "fcgi_host/protocol/cgi_head.hpp"
#include "fcgi_host/worker/large_buffers.hpp"
#include "fcgi_host/worker/worker_loop.hpp"
#include "process_manager/clock.hpp"

#include <cerrno>
#include <cstring>
#include <exception>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>

namespace fcgi_host {
namespace {

using process_manager::WorkerState;
using Kind = ClientErrorLog::Kind;

constexpr std::size_t kShrinkAbove = 256 * 1024;
constexpr std::uint64_t kUploadMemoryKeepNs = 1'000'000'000; // upload_memory_ without a use
// After a handler ran this long, the worker looks whether the client is still there.
constexpr std::uint64_t kLookForAbortAfterNs = 100'000'000;

// The handler in its boundary (WorkerLoop::call_handler()), the response's end
// (WorkerLoop::end_response()) and its encoding, which touch the lane only (below), folded into
// their callers: an inline request pays no call for them.
[[gnu::always_inline]] inline void handle_in_boundary(Lane& lane);
[[gnu::always_inline]] inline void end_lane_response(Lane& lane);
[[gnu::always_inline]] inline void encode(Lane& lane);

} // namespace

// Request::aborted(): a non-blocking look at the connection for FCGI_ABORT_REQUEST or a close.
// The buffer never grows here: the request being served holds views into it. With no room
// left, a peek still sees a close.
bool probe_aborted(void* context) {
  auto& c = *static_cast<Connection*>(context);
  if (c.guard.aborted()) return true;
  if (c.in.free_space() < records::kHeaderSize * 2) {
    char peek[1];
    ssize_t n = ::recv(c.fd, peek, sizeof peek, MSG_DONTWAIT | MSG_PEEK);
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR);
  }
  ssize_t n = ::recv(c.fd, c.in.tail(), c.in.free_space(), MSG_DONTWAIT);
  if (n == 0) return true;
  if (n < 0) return errno != EAGAIN && errno != EINTR;
  c.in.size() += static_cast<std::size_t>(n);
  c.guard.advance(c.in.data(), c.in.size(), c.replies); // takes only an abort of this request
  return c.guard.aborted();
}

// ---- the steps -------------------------------------------------------------------------------

// Runs one complete request. False when the connection was closed, moved, or is a handler
// thread's until its request is done.
bool WorkerLoop::serve_request(Connection& c, Lane* lane) {
  if (c.guard.aborted()) {
    // FCGI_ABORT_REQUEST before the handler ran: end the request without running it.
    records::append_end_request(c.replies, c.guard.request_id(), 0,
                                records::ProtocolStatus::RequestComplete);
    return keep_or_close(c, RequestCodec::Ending::Kept, 0, nullptr, true);
  }
  if (!lane) {
    // With one thread its one lane, when free, without the look (idle_lane() would give it).
    Lane& first = *lanes_.front();
    lane = !threads_ && !first.busy && !quarantined_ ? &first : admitting() ? idle_lane() : nullptr;
    if (!lane) {
      hold(c); // every thread busy: another worker takes it, or it waits for a thread here
      return false;
    }
  }
  switch (begin(c, *lane)) {
  case Begun::Closed:
    return false;
  case Begun::Answered:
    break;
  case Begun::ForHandler:
    // The one place where the modes part: where respond runs.
    if (threads_) return lane->index == 0 ? run_on_loop_thread(c, *lane) : hand_to_thread(c, *lane);
    const int fd = c.fd;
    serving_fd_ = fd;
    watch_.handler_starts(); // the table is free while the handler runs
    respond_inline(*lane);
    watch_.handler_returned();
    serving_fd_ = -1;
    if (lane->fd < 0) return finish_without_connection(fd, c, *lane);
    break;
  }
  return finish(c, *lane);
}

// On the loop: the request's records decoded into the lane (views into c.in, which nothing else
// touches until the request is finished), published to its slot, and answered here when the
// host answers it itself: a body that could not be stored (400), the status and ping pages, a
// request shed by --max-queue-time (503).
// (Folded into serve_request(); what it reads again after a call is kept in locals.)
[[gnu::always_inline]] inline WorkerLoop::Begun WorkerLoop::begin(Connection& c, Lane& lane) {
  RecordGuard& g = c.guard;
  const std::uint64_t start_ns = process_manager::monotonic_ns();
  lane.start_ns = start_ns;
  RequestCodec::Decoded decoded =
      lane.codec.decode(c.fd, c.in.data() + g.request_begin(), g.request_end() - g.request_begin(),
                        g.framing(), start_ns + write_timeout_ns_, lane.request);
  if (decoded == RequestCodec::Decoded::Refused) {
    lane.streamed.reset();
    close_connection(c, "the decoder refused a request the record guard accepted");
    return Begun::Closed;
  }
  take_lane(lane);
  lane.fd = c.fd;
  lane.connection = &c;
  lane.backlog = &c.backlog;
  const bool whole = decoded == RequestCodec::Decoded::Whole;
  lane.whole = whole;
  lane.shed = false;
  if (lane.failure) lane.failure = nullptr; // (set only by a handler that threw)
  lane.failed_after_head = lane.aborted = lane.write_timed_out = false;
  lane.refused_head = 0;
  lane.thread_cpu_ns = -1;
  if (c.pump) app::HostAccess::swap_body(lane.request, c.pump->body()); // gathered as it arrived
  if (lane.streamed)
    app::HostAccess::set_body_stream(lane.request, &*lane.streamed); // the reader sees an abort
  else
    app::HostAccess::set_abort_probe(lane.request, probe_aborted, &c);
  lane.endpoint = whole ? worker_endpoint(settings_.observe, lane.request.path()) : Endpoint::None;
  const bool counted = lane.counted();
  lane.request_number = ++request_number_;
  if (idle_timer_.paused()) idle_timer_.resume(); // a new period of idle work (idle_work.cpp)
  process_manager::RequestSlot& rs = lane.slot;
  rs.request_number.store(lane.request_number, std::memory_order_relaxed);
  if (counted) {
    rs.request_start_ns.store(start_ns, std::memory_order_relaxed);
    rs.queue_ns.store(-1, std::memory_order_relaxed);
    if (publish_every_request_) {
      std::string_view method = lane.request.method(), uri = lane.request.uri();
      process_manager::Scoreboard::set_request(rs, method.data(), method.size(), uri.data(),
                                               uri.size(), lane.request.carried_id());
    }
    lane.state.store(WorkerState::Handling, std::memory_order_relaxed);
    lane.metrics.begin(start_ns);
  }
  lane.response.reset(lane.response_sink());
  if (!whole) {
    lane.response.status = 400;
    lane.response.set_content("Bad Request\n", "text/plain");
  } else if (!counted) {
    answer_endpoint(lane);
  } else if (queue_gate_.admit(lane.request, lane.response)) {
    lane.queue_ns = queue_gate_.last_queue_ns();
    rs.queue_ns.store(lane.queue_ns, std::memory_order_relaxed);
    return Begun::ForHandler;
  } else {
    lane.shed = true; // a 503, the handler not run
    lane.queue_ns = queue_gate_.last_queue_ns();
  }
  encode(lane);
  return Begun::Answered;
}

// Status and ping are answered here, before the handler, and are no request of the pool: the
// slot stays idle, so the status page never counts itself as active.
void WorkerLoop::answer_endpoint(Lane& lane) {
  const app::Request& request = lane.request;
  bool allowed = remote_addr_allowed(settings_.observe.status_allow, request.param("REMOTE_ADDR"));
  // TERM from the master (Stop::Drain) is the host's stop; a worker retired at a reload or an
  // upgrade, or recycled, stops with QUIT while the host serves on: its ping stays 200.
  fill_response(fcgi_host::answer_endpoint(lane.endpoint, settings_.observe, scoreboard_,
                                           listen_fd_, request.query(), allowed,
                                           request.param("HTTP_ACCEPT"), stop_ == Stop::Drain),
                lane.response);
}

namespace {

// Out of line: the handler's exception costs its request a 500 (after the head went out, the
// response is cut so that the web server sees it incomplete); the line is written by finish().
void answer_failure(Lane& lane) {
  if (lane.response.head_sent()) {
    lane.failed_after_head = true;
    return;
  }
  lane.response.reset(lane.response_sink());
  lane.response.status = 500;
  lane.response.set_content("Internal Server Error\n", "text/plain");
}

// An inline event stream's handler returned: its heartbeats stop before the response's end goes
// out (stream_heartbeat.hpp).
void end_inline_stream(Lane& lane) {
  std::lock_guard lock(lane.mutex);
  lane.event_stream = false;
}

} // namespace

// The handler inside its exception boundary, then its response encoded. Inline with one thread
// (the watch's table lock given up around it by the caller), on the lane's thread with more.
void WorkerLoop::respond(Lane& lane) {
  respond_inline(lane);
}

// respond(), folded into serve_request() with one thread: the steps of an inline request cost
// no call of their own.
[[gnu::always_inline]] inline void WorkerLoop::respond_inline(Lane& lane) {
  const std::uint64_t cpu_start = start_cpu_sample(lane);
  handle_in_boundary(lane);
  if (!lane.response.finished()) end_lane_response(lane); // (else ended by Response::finish())
  end_cpu_sample(lane, cpu_start);
}

void WorkerLoop::call_handler(Lane& lane) {
  handle_in_boundary(lane);
}

// A thread's CPU time per route: its own clock (a system call), on the requests the metrics
// sample, as the loop's own clock is read around an inline request. 0: not sampled.
std::uint64_t WorkerLoop::start_cpu_sample(Lane& lane) {
  return lane.owner && lane.metrics.cpu_due() ? thread_cpu_ns() : 0;
}

void WorkerLoop::end_cpu_sample(Lane& lane, std::uint64_t start) {
  if (start) lane.thread_cpu_ns = static_cast<std::int64_t>(thread_cpu_ns() - start);
}

// The response's end: after the handler returned, or at its Response::finish().
void WorkerLoop::end_response(Lane& lane) {
  end_lane_response(lane);
}

namespace {

inline void handle_in_boundary(Lane& lane) {
  try {
    lane.handler->handle(lane.request, lane.response);
  } catch (...) {
    lane.failure = std::current_exception();
  }
}

inline void end_lane_response(Lane& lane) {
  if (lane.failure) answer_failure(lane);
  if (lane.heartbeat && lane.events) end_inline_stream(lane); // no heartbeat inside the end
  // nginx closes the connection when its client leaves; a small answer written to it would
  // still "succeed". After a long handler (when that is likely, and one system call is cheap
  // beside it) the worker looks, so that the request is logged and counted as aborted (499).
  // (Not while a streamed body is read: its bytes are the reader's.)
  if (!lane.streamed && process_manager::monotonic_ns() - lane.start_ns > kLookForAbortAfterNs &&
      probe_aborted(lane.connection))
    lane.aborted = true;
  lane.encoding_end = true;
  encode(lane);
  // The rest of a streamed body the handler left is read and dropped (bounded by --max-body and
  // its deadline) before the connection may serve another request.
  lane.body_ended =
      !lane.streamed || lane.ending == RequestCodec::Ending::WriteFailed || lane.streamed->finish();
}

} // namespace

// Response::finish(), where the handler runs: the response ends now. Inline, it goes out whole
// before the handler goes on (until --write-timeout), not into the connection's backlog, which
// the loop writes only after the handler returned, and the connection's part follows
// (pass_on_finished_connection). The slot keeps the request (its deadline, a crash block) and
// says that its response went out.
void WorkerLoop::end_response_early(Lane& lane) {
  lane.responded_ns = process_manager::monotonic_ns();
  lane.metrics.responded(lane.responded_ns);
  if (!lane.owner) lane.backlog = nullptr;
  end_lane_response(lane);
  if (!lane.owner) pass_on_finished_connection(lane);
  // Request::aborted() asks the connection no more: it goes on to its next request.
  app::HostAccess::set_abort_probe(lane.request, nullptr, nullptr);
  lane.slot.responded_ns.store(lane.responded_ns, std::memory_order_relaxed);
  lane.state.store(WorkerState::Handling, std::memory_order_relaxed);
  if (lane.owner) HandlerThreads::response_ended(lane);
}

// With one thread, at Response::finish(), on the loop inside the handler: the connection's part
// of finish now. One that is not kept is shut for writing (a web server that did not ask to keep
// it, nginx without fastcgi_keep_conn, ends the response at the connection's end, not at
// FCGI_END_REQUEST; the loop closes it once the handler returned). A kept one goes to a free
// worker now, with what it holds, as a slow handler's other connections do (decision 11: its
// next request must not wait for this handler); with none free it stays, and its next request
// waits for the handler's return. The watch's thread may hand connections off while a handler
// runs: the table lock is taken for this.
void WorkerLoop::pass_on_finished_connection(Lane& lane) {
  if (lane.ending == RequestCodec::Ending::Closed) ::shutdown(lane.fd, SHUT_WR);
  if (lane.ending != RequestCodec::Ending::Kept || !can_hand_off(true)) return;
  watch_.handler_returned();
  if (Connection* c = table_.find(lane.fd)) {
    settle_ending(*c, lane);
    lane.pumped = c->pump != nullptr;
    keep_request_bytes(*c, lane); // the handler still reads its request
    lane.fd = -1;
    lane.connection = nullptr;
    serving_fd_ = -1;
    if (keep_or_close(*c, lane) && c->phase == Connection::Phase::KeptIdle) hand_off(*c);
  }
  watch_.handler_starts();
}

void LaneEnd::end_response(app::Response&) {
  lane_.loop->end_response_early(lane_);
}

namespace {

// The response's bytes: to the socket (what it does not take at once waits in the connection's
// backlog), or through the lane to the loop (RequestCodec::deliver_to, a handler thread's).
inline void encode(Lane& lane) {
  if (lane.counted()) lane.state.store(WorkerState::Writing, std::memory_order_relaxed);
  if (lane.failed_after_head) {
    lane.codec.abort();
    lane.ending = RequestCodec::Ending::WriteFailed;
    return;
  }
  if (!lane.response.head_sent())
    lane.codec.send(lane.response, lane.on_thread ? nullptr : lane.backlog);
  if ((lane.refused_head = lane.codec.refused_head())) lane.response.status = 500;
  lane.ending = lane.codec.finish();
  // Written by this thread to the socket itself: a timeout is the client's not reading (a
  // thread's is seen by the loop, write_timed_out()).
  if (lane.ending == RequestCodec::Ending::WriteFailed && !lane.on_thread)
    lane.write_timed_out = errno == ETIMEDOUT;
}

} // namespace

// On the loop, after the response: both parts, the lane's first (its lines and logs read the
// request, whose views are into the connection's buffer), then the connection kept or closed.
// False: the connection was closed.
bool WorkerLoop::finish(Connection& c, Lane& lane) {
  app::HostAccess::set_abort_probe(lane.request, nullptr, nullptr);
  settle_ending(c, lane);
  finish_work_inline(lane, c.pump != nullptr);
  const bool open = keep_or_close(c, lane); // (what it reads of the lane stays)
  lane.streamed.reset();
  return open;
}

// With one thread, after a handler whose connection went on at Response::finish(): the lane's
// part. True when the connection (`fd`, `c`) is still here (no free worker took it) for its next
// request; `c` is not read: it may be gone.
bool WorkerLoop::finish_without_connection(int fd, const Connection& c, Lane& lane) {
  const bool here = table_.find(fd) == &c;
  lane.streamed.reset();
  finish_work(lane, lane.pumped);
  return here;
}

// The connection's buffer goes to the lane as it is, and the connection goes on with a copy (one
// copy of the request's bytes, only for a request that finished early).
void WorkerLoop::keep_request_bytes(Connection& c, Lane& lane) {
  ByteBuffer copy;
  copy.reserve_more(c.in.size());
  if (c.in.size() > 0) std::memcpy(copy.data(), c.in.data(), c.in.size());
  copy.size() = c.in.size();
  lane.request_bytes = std::move(c.in);
  c.in = std::move(copy);
}

// What the connection says of the request's end, while the lane has it: an abort, a close.
void WorkerLoop::settle_ending(Connection& c, Lane& lane) {
  lane.aborted = lane.aborted || c.guard.aborted() || (lane.streamed && lane.streamed->aborted()) ||
                 (lane.ending == RequestCodec::Ending::WriteFailed && !lane.failed_after_head &&
                  !lane.write_timed_out);
}

// The lane's part, once the handler returned: the lines its failures earn, metrics and logs, the
// slot, and the lane free again.
void WorkerLoop::finish_work(Lane& lane, bool pumped) {
  finish_work_inline(lane, pumped);
}

[[gnu::always_inline]] inline void WorkerLoop::finish_work_inline(Lane& lane, bool pumped) {
  if (lane.failure || lane.refused_head || lane.write_timed_out ||
      lane.response.used_after_finish())
    report_failures(lane);
  if (lane.failed_after_head) lane.response.status = 500; // the client got no whole answer
  lane.metrics.set_cpu_ns(lane.thread_cpu_ns);
  observe(lane);
  if (pumped) keep_upload_memory(lane);
  release_large_buffers(lane.request, lane.response);
  if (lane.counted()) {
    lane.slot.request_start_ns.store(0, std::memory_order_relaxed);
    process_manager::single_writer_add(slot_.requests, 1);
    lane.state.store(WorkerState::Idle, std::memory_order_relaxed);
    count_request();
  }
  if (lane.responded_ns) {
    lane.responded_ns = 0;
    lane.slot.responded_ns.store(0, std::memory_order_relaxed);
    lane.request_bytes = ByteBuffer{};
  }
  release_lane(lane);
}

namespace {

// Why the handler's head was answered with a 500: a header that is none (the first one), or its
// size.
std::string head_refusal_line(const std::string& request, const app::Response& response,
                              std::size_t head, std::size_t max_response_head) {
  for (const auto& [name, value] : response.headers)
    if (!cgi::valid_header(name, value))
      return "response header \"" + name + "\" to " + request +
             " is not a valid header (a name is an RFC 9110 token; a value holds no CR, LF or "
             "NUL): answered 500";
  return "response head of " + std::to_string(head) + " bytes to " + request +
         " is larger than --max-response-head (" + std::to_string(max_response_head) +
         "): answered 500";
}

std::string what_of(const std::exception_ptr& failure) {
  try {
    std::rethrow_exception(failure);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {}
  return "unknown exception";
}

} // namespace

// Out of line, one line per failure: the handler threw, its head was refused, its client did not
// read the response in time. With threads, the line names the thread.
void WorkerLoop::report_failures(Lane& lane) {
  const app::Request& r = lane.request;
  const std::string request = std::string(r.method()) + " " + std::string(r.uri());
  const std::string id = " (request id " + std::string(r.request_id()) +
                         (threads_ ? ", thread " + std::to_string(lane.index) : "") + ")";
  if (lane.failure)
    client_errors_.write(Kind::Handler,
                         "handler failed on " + request + id + ": " + what_of(lane.failure) +
                             (lane.failed_after_head ? " (response cut)"
                              : lane.responded_ns
                                  ? " (after Response::finish(): its response had been sent)"
                                  : ""));
  // (The lane's response still holds the handler's headers: the 500 went out in their place.)
  if (lane.refused_head)
    client_errors_.write(Kind::Handler, head_refusal_line(request, lane.response, lane.refused_head,
                                                          settings_.max_response_head));
  if (lane.write_timed_out)
    client_errors_.write(Kind::Connection,
                         "response to " + request + id +
                             " cut: the client did not read it within --write-timeout");
  if (lane.response.used_after_finish())
    client_errors_.write(Kind::Handler, "handler wrote or finished again after "
                                        "Response::finish() on " +
                                            request + id + ": ignored");
}

// Metrics, the slow log and the access log, after the response went out. Nothing here formats
// a line or reads a clock unless that feature is on.
void WorkerLoop::observe(Lane& lane) {
  // A request shed by the queue gate is no call of its handler (it is counted in `shed`).
  const bool ran = lane.counted() && !lane.shed;
  if (ran)
    lane.metrics.end(lane.request.route(), lane.response.status, lane.request,
                     access_log_.enabled(), lane.aborted);
  if (access_log_.enabled()) log_access(lane, ran);
}

// Out of line: its line is built only when the access log is on (and the registers it needs are
// not saved on every request).
[[gnu::noinline]] void WorkerLoop::log_access(const Lane& lane, bool ran) {
  const app::Request& request = lane.request;
  const app::Response& response = lane.response;
  AccessLog::Entry e;
  e.remote_addr = request.param("REMOTE_ADDR");
  e.method = request.method();
  e.uri = request.uri();
  e.status = lane.aborted ? kAbortedStatus : response.status;
  e.duration_ns =
      ran ? lane.metrics.duration_ns() : process_manager::monotonic_ns() - lane.start_ns;
  e.cpu_ns = ran ? lane.metrics.cpu_ns() : -1;
  e.queue_ns = lane.counted() && lane.whole ? lane.queue_ns : -1;
  e.body_bytes = response.head_sent() ? -1
                 : app::status_without_content(response.status)
                     ? 0 // its body is not sent
                     : static_cast<std::int64_t>(response.body.size());
  e.pid = slot_.pid.load(std::memory_order_relaxed);
  e.slot = slot_index_;
  e.generation = generation_;
  e.request = &request;
  e.response = &response;
  access_log_.write(e);
}

bool WorkerLoop::keep_or_close(Connection& c, Lane& lane) {
  return keep_or_close(c, lane.ending, lane.start_ns, lane.streamed ? &*lane.streamed : nullptr,
                       lane.body_ended);
}

// After the request: its bytes leave the buffer, and the connection waits for the next one,
// finishes writing a response the client reads slowly, or closes. False: closed.
bool WorkerLoop::keep_or_close(Connection& c, RequestCodec::Ending ending, std::uint64_t start_ns,
                               const StreamedBody* streamed, bool body_ended) {
  RecordGuard& g = c.guard;
  bool keep = g.keep_connection() && ending == RequestCodec::Ending::Kept;
  if (ending == RequestCodec::Ending::WriteFailed) {
    // A streamed body that failed first says why (the answer to it could not go out).
    const bool said = streamed && !streamed->aborted() && !streamed->failure().empty();
    close_connection(c, said ? "request body: " + streamed->failure() : std::string());
    return false;
  }
  if (streamed && !finish_streamed_body(c, *streamed, body_ended)) return false;
  c.body_mode_asked = false;
  c.pump.reset();
  c.in.consume_front(g.request_end());
  g.consume_request();
  c.in.shrink_if_above(kShrinkAbove);
  c.head_deadline_ns = 0;
  c.body_start_ns = 0;
  flush_replies(c);
  if (!c.replies.empty()) keep = false;
  if (!c.backlog.empty()) {
    c.phase = Connection::Phase::Writing;
    c.keep_after_write = keep;
    c.deadline_ns = policy_.write_deadline(start_ns); // the response's total deadline
    const int fd = c.fd;
    watch_for_write(c, true);
    return table_.find(fd) != nullptr;
  }
  if (!keep) {
    close_connection(c);
    return false;
  }
  c.phase = Connection::Phase::KeptIdle;
  return true;
}

// ---- the lanes --------------------------------------------------------------------------------

// Lane 0 first: with threads, the loop's thread runs it itself (no hand-over), but only while it
// holds the loop, and after a takeover only when no other lane is free (loop_lane_backoff_).
Lane* WorkerLoop::idle_lane() {
  const bool loop_lane = !threads_ || relay_.loop_on_own_thread();
  const bool later = threads_ && loop_lane_backoff_ > 0;
  if (loop_lane && !later && !lanes_[0]->busy) return lanes_[0].get();
  for (std::size_t i = 1; i < lanes_.size(); ++i)
    if (!lanes_[i]->busy) {
      if (later) --loop_lane_backoff_;
      return lanes_[i].get();
    }
  return loop_lane && !lanes_[0]->busy ? lanes_[0].get() : nullptr;
}

void WorkerLoop::take_lane(Lane& lane) {
  lane.busy = true;
  ++busy_lanes_;
}

void WorkerLoop::release_lane(Lane& lane) {
  if (!lane.busy) return;
  lane.busy = false;
  --busy_lanes_;
  lane.fd = -1;
  lane.connection = nullptr;
  if (lane.owner || lane.events) HandlerThreads::release(lane); // (an inline event stream's too)
}

// ---- a body the handler reads as it arrives --------------------------------------------------

WorkerLoop::Streamed WorkerLoop::serve_streamed(Connection& c) {
  RecordGuard& g = c.guard;
  const RequestFraming framing = g.framing();
  // Params split over several records are joined in place when decoded, which can be done only
  // once: such a request (no web server known to us sends one) gets its body whole. So does a
  // request that finds every thread busy (it waits for a thread with its body).
  Lane* lane = admitting() ? idle_lane() : nullptr;
  if (!lane || !framing.params || framing.params->content_length == 0 || g.aborted() ||
      framing.params_records.size() != 1)
    return Streamed::No;
  // The params (and the body so far) as the handler will see them, to ask it.
  char* records = c.in.data() + g.request_begin();
  if (lane->codec.peek(records, g.request_end() - g.request_begin(), framing, lane->request) !=
          RequestCodec::Decoded::Whole ||
      worker_endpoint(settings_.observe, lane->request.path()) != Endpoint::None ||
      !handler_.streams_body(lane->request))
    return Streamed::No;
  if (c.body_start_ns == 0) c.body_start_ns = process_manager::monotonic_ns();
  // What was read past the records the guard framed is the start of the rest of the body. The
  // handler's reader reads the socket itself, inline or on its thread: the loop does not read a
  // connection whose request is served.
  const std::string_view buffered(c.in.data() + g.request_end(), c.in.size() - g.request_end());
  lane->streamed.emplace(c.fd,
                         StdinStream::Start{g.request_id(), g.body_size(),
                                            framing.params->content_length,
                                            settings_.limits.request.max_body},
                         buffered, policy_, c.body_start_ns);
  g.streamed_body();
  return serve_request(c, lane) ? Streamed::Served : Streamed::Closed;
}

// After the response: what was read past the body's end goes back into the connection's buffer,
// after the request's records. False: the body did not end as it should (respond() read and
// dropped the rest the handler left), and the connection is closed.
bool WorkerLoop::finish_streamed_body(Connection& c, const StreamedBody& body, bool ended) {
  if (!ended) {
    close_connection(c, body.aborted() ? std::string() : "request body: " + body.failure());
    return false;
  }
  const std::string_view rest = body.leftover();
  const std::size_t end = c.guard.request_end();
  c.in.size() = end;
  c.in.reserve_more(rest.size()); // rest is in the buffer's own bytes past `end`, or in scratch
  std::memmove(c.in.data() + end, rest.data(), rest.size());
  c.in.size() = end + rest.size();
  return true;
}

// The memory of a body a pump gathered goes back to upload_memory_ for the next one (the
// request keeps what the pump held before: the small start of the body).
void WorkerLoop::keep_upload_memory(Lane& lane) {
  app::HostAccess::swap_body(lane.request, upload_memory_);
  upload_memory_.clear(); // a spilled body's file is closed; the memory's capacity stays
  if (upload_memory_.memory().capacity() > 2 * lane.request.spill_threshold())
    upload_memory_.release(0);
  upload_memory_used_ns_ = process_manager::monotonic_ns();
}

// Recycling checks after each request. ru_maxrss is one getrusage() (no file to open and parse,
// unlike /proc/self/statm), and is only asked for when --max-rss is set.
[[gnu::always_inline]] inline void WorkerLoop::count_request() {
  ++served_;
  if (upload_memory_used_ns_ != 0 &&
      process_manager::monotonic_ns() - upload_memory_used_ns_ > kUploadMemoryKeepNs) {
    upload_memory_.release(0);
    upload_memory_used_ns_ = 0;
  }
  if (request_limit_ && served_ >= request_limit_) {
    recycle_reason_ = "--max-requests reached";
  } else if (settings_.max_rss_kib > 0) {
    rusage ru{};
    if (getrusage(RUSAGE_SELF, &ru) == 0 && ru.ru_maxrss > settings_.max_rss_kib)
      recycle_reason_ = "peak RSS above --max-rss";
  }
}

} // namespace fcgi_host
