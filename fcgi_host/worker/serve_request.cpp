// One complete request, in named steps:
//   decode → (status or ping page | the handler, inside its exception boundary) → send →
//   observe (metrics, slow and access log) → keep or close the connection.
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

// Runs one complete request. False when the connection was closed (or moved).
bool WorkerLoop::serve_request(Connection& c) {
  Outcome out;
  if (c.guard.aborted()) {
    // FCGI_ABORT_REQUEST before the handler ran: end the request without running it.
    records::append_end_request(c.replies, c.guard.request_id(), 0,
                                records::ProtocolStatus::RequestComplete);
    return keep_or_close(c, out);
  }
  if (threads_) return serve_on_thread(c);
  if (!decode(c, out)) return false;
  request_slot_.request_number.store(++request_number_, std::memory_order_relaxed);
  if (out.counted()) {
    request_slot_.request_start_ns.store(out.start_ns, std::memory_order_relaxed);
    request_slot_.queue_ns.store(-1, std::memory_order_relaxed);
    if (settings_.observe.metrics) {
      std::string_view method = request_.method(), uri = request_.uri();
      process_manager::Scoreboard::set_request(request_slot_, method.data(), method.size(),
                                               uri.data(), uri.size(), request_.carried_id());
    }
    slot_.state.store(WorkerState::Handling, std::memory_order_relaxed);
    metrics_.begin(out.start_ns);
  }
  response_.reset(&codec_.sink());
  if (!out.whole) {
    response_.status = 400;
    response_.set_content("Bad Request\n", "text/plain");
  } else if (!out.counted()) {
    answer_endpoint(out, request_, response_);
  } else if (queue_gate_.admit(request_, response_)) { // else shed: a 503, the handler not run
    request_slot_.queue_ns.store(queue_gate_.last_queue_ns(), std::memory_order_relaxed);
    serving_fd_ = c.fd;
    run_handler(out);
    serving_fd_ = -1;
    // nginx closes the connection when its client leaves; a small answer written to it would
    // still "succeed". After a long handler (when that is likely, and one system call is cheap
    // beside it) the worker looks, so that the request is logged and counted as aborted (499).
    // (Not while a streamed body is read: its bytes are the reader's.)
    if (!streamed_ && process_manager::monotonic_ns() - out.start_ns > kLookForAbortAfterNs &&
        probe_aborted(&c))
      out.aborted = true;
  }
  send(c, out);
  app::HostAccess::set_abort_probe(request_, nullptr, nullptr);
  out.aborted = out.aborted || c.guard.aborted() || (streamed_ && streamed_->aborted());
  observe(out, request_, response_, metrics_, out.whole && queue_gate_.last_shed(),
          out.counted() && out.whole ? queue_gate_.last_queue_ns() : -1);
  if (c.pump) keep_upload_memory();
  release_large_buffers(request_, response_);
  if (out.counted()) {
    request_slot_.request_start_ns.store(0, std::memory_order_relaxed);
    process_manager::single_writer_add(slot_.requests, 1);
    slot_.state.store(WorkerState::Idle, std::memory_order_relaxed);
    count_request();
  }
  return keep_or_close(c, out);
}

// The request's records (params, body) are decoded into request_, as views into c.in.
// False: closed.
bool WorkerLoop::decode(Connection& c, Outcome& out) {
  RecordGuard& g = c.guard;
  out.start_ns = process_manager::monotonic_ns();
  RequestCodec::Decoded decoded =
      codec_.decode(c.fd, c.in.data() + g.request_begin(), g.request_end() - g.request_begin(),
                    g.framing(), out.start_ns + write_timeout_ns_, request_);
  if (decoded == RequestCodec::Decoded::Refused) {
    close_connection(c, "the decoder refused a request the record guard accepted");
    return false;
  }
  out.whole = decoded == RequestCodec::Decoded::Whole;
  if (c.pump) app::HostAccess::swap_body(request_, c.pump->body()); // gathered as it arrived
  if (streamed_)
    app::HostAccess::set_body_stream(request_, streamed_); // the reader sees an abort
  else
    app::HostAccess::set_abort_probe(request_, probe_aborted, &c);
  if (out.whole) out.endpoint = worker_endpoint(settings_.observe, request_.path());
  return true;
}

// Status and ping are answered here, before the handler, and are no request of the pool: the
// slot stays idle, so the status page never counts itself as active.
void WorkerLoop::answer_endpoint(Outcome& out, const app::Request& request,
                                 app::Response& response) {
  bool allowed = remote_addr_allowed(settings_.observe.status_allow, request.param("REMOTE_ADDR"));
  // TERM from the master (Stop::Drain) is the host's stop; a worker retired at a reload or an
  // upgrade, or recycled, stops with QUIT while the host serves on: its ping stays 200.
  fill_response(fcgi_host::answer_endpoint(out.endpoint, settings_.observe, scoreboard_, listen_fd_,
                                           request.query(), allowed, request.param("HTTP_ACCEPT"),
                                           stop_ == Stop::Drain),
                response);
}

// The handler, without the table lock (so that kept connections can move while it runs long).
// Its exception costs its request a 500 and one log line, and the worker goes on; after the
// head went out, the response is cut so that the web server sees it incomplete.
void WorkerLoop::run_handler(Outcome& out) {
  std::exception_ptr failure;
  watch_.handler_starts();
  try {
    handler_.handle(request_, response_);
  } catch (...) {
    failure = std::current_exception();
  }
  watch_.handler_returned();
  if (failure) handler_failed(out, failure);
}

// Out of line, with the table held again: the strings of the report were set up on every call
// of a handler when they were part of run_handler().
void WorkerLoop::handler_failed(Outcome& out, const std::exception_ptr& failure) {
  std::string what = "unknown exception";
  try {
    std::rethrow_exception(failure);
  } catch (const std::exception& e) {
    what = e.what();
  } catch (...) {}
  client_errors_.write(Kind::Handler, "handler failed on " + std::string(request_.method()) + " " +
                                          std::string(request_.uri()) + " (request id " +
                                          std::string(request_.request_id()) + "): " + what +
                                          (response_.head_sent() ? " (response cut)" : ""));
  if (response_.head_sent()) {
    out.failed_after_head = true;
    response_.status = 500; // for the metrics and the access log: the client got no whole answer
    return;
  }
  response_.reset(&codec_.sink());
  response_.status = 500;
  response_.set_content("Internal Server Error\n", "text/plain");
}

namespace {

// Why the handler's head was answered with a 500: a header that is none (the first one), or its
// size.
std::string head_refusal_line(const app::Request& request_in, const app::Response& response,
                              std::size_t head, std::size_t max_response_head) {
  const std::string request =
      std::string(request_in.method()) + " " + std::string(request_in.uri());
  for (const auto& [name, value] : response.headers)
    if (!cgi::valid_header(name, value))
      return "response header \"" + name + "\" to " + request +
             " is not a valid header (a name is an RFC 9110 token; a value holds no CR, LF or "
             "NUL): answered 500";
  return "response head of " + std::to_string(head) + " bytes to " + request +
         " is larger than --max-response-head (" + std::to_string(max_response_head) +
         "): answered 500";
}

} // namespace

void WorkerLoop::send(Connection& c, Outcome& out) {
  if (out.counted()) slot_.state.store(WorkerState::Writing, std::memory_order_relaxed);
  if (out.failed_after_head) {
    codec_.abort();
    out.ending = RequestCodec::Ending::WriteFailed;
    return;
  }
  if (!response_.head_sent()) codec_.send(response_, &c.backlog);
  if (std::size_t head = codec_.refused_head()) {
    client_errors_.write(Kind::Handler,
                         head_refusal_line(request_, response_, head, settings_.max_response_head));
    response_.status = 500; // for the metrics and the access log
  }
  out.ending = codec_.finish();
  if (out.ending == RequestCodec::Ending::WriteFailed && errno != ETIMEDOUT) out.aborted = true;
  if (out.ending == RequestCodec::Ending::WriteFailed && errno == ETIMEDOUT)
    client_errors_.write(Kind::Connection,
                         "response to " + std::string(request_.method()) + " " +
                             std::string(request_.uri()) + " (request id " +
                             std::string(request_.request_id()) +
                             ") cut: the client did not read it within --write-timeout");
}

// Metrics, the slow log and the access log, after the response went out. Nothing here formats
// a line or reads a clock unless that feature is on.
void WorkerLoop::observe(const Outcome& out, const app::Request& request,
                         const app::Response& response, RequestMetrics& metrics, bool shed,
                         std::int64_t queue_ns) {
  AccessLog& log = AccessLog::get();
  // A request shed by the queue gate is no call of its handler (it is counted in `shed`).
  bool ran = out.counted() && !shed;
  if (ran) metrics.end(request.route(), response.status, request, log.enabled(), out.aborted);
  if (!log.enabled()) return;
  AccessLog::Entry e;
  e.remote_addr = request.param("REMOTE_ADDR");
  e.method = request.method();
  e.uri = request.uri();
  e.status = out.aborted ? kAbortedStatus : response.status;
  e.duration_ns = ran ? metrics.duration_ns() : process_manager::monotonic_ns() - out.start_ns;
  e.cpu_ns = ran ? metrics.cpu_ns() : -1;
  e.queue_ns = queue_ns;
  e.body_bytes = response.head_sent() ? -1
                 : app::status_without_content(response.status)
                     ? 0 // its body is not sent
                     : static_cast<std::int64_t>(response.body.size());
  e.pid = slot_.pid.load(std::memory_order_relaxed);
  e.slot = slot_index_;
  e.generation = generation_;
  e.request = &request;
  e.response = &response;
  log.write(e);
}

// After the request: its bytes leave the buffer, and the connection waits for the next one,
// finishes writing a response the client reads slowly, or closes. False: closed.
bool WorkerLoop::keep_or_close(Connection& c, Outcome& out) {
  RecordGuard& g = c.guard;
  bool keep = g.keep_connection() && out.ending == RequestCodec::Ending::Kept;
  if (out.ending == RequestCodec::Ending::WriteFailed) {
    // A streamed body that failed first says why (the answer to it could not go out).
    const bool said = streamed_ && !streamed_->aborted() && !streamed_->failure().empty();
    close_connection(c, said ? "request body: " + streamed_->failure() : std::string());
    return false;
  }
  if (streamed_ && !finish_streamed_body(c)) return false;
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
    c.deadline_ns = policy_.write_deadline(out.start_ns); // the response's total deadline
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

// ---- a body the handler reads as it arrives --------------------------------------------------

WorkerLoop::Streamed WorkerLoop::serve_streamed(Connection& c) {
  // With handler threads a body arrives whole (the loop alone reads the connection).
  if (threads_) return Streamed::No;
  RecordGuard& g = c.guard;
  const RequestFraming framing = g.framing();
  // Params split over several records are joined in place when decoded, which can be done only
  // once: such a request (no web server known to us sends one) gets its body whole.
  if (!framing.params || framing.params->content_length == 0 || g.aborted() ||
      framing.params_records.size() != 1)
    return Streamed::No;
  // The params (and the body so far) as the handler will see them, to ask it.
  char* records = c.in.data() + g.request_begin();
  if (codec_.peek(records, g.request_end() - g.request_begin(), framing, request_) !=
          RequestCodec::Decoded::Whole ||
      worker_endpoint(settings_.observe, request_.path()) != Endpoint::None ||
      !handler_.streams_body(request_))
    return Streamed::No;
  if (c.body_start_ns == 0) c.body_start_ns = process_manager::monotonic_ns();
  // What was read past the records the guard framed is the start of the rest of the body.
  const std::string_view buffered(c.in.data() + g.request_end(), c.in.size() - g.request_end());
  StreamedBody body(c.fd,
                    {g.request_id(), g.body_size(), framing.params->content_length,
                     settings_.limits.request.max_body},
                    buffered, policy_, c.body_start_ns);
  g.streamed_body();
  streamed_ = &body;
  const bool open = serve_request(c);
  streamed_ = nullptr;
  return open ? Streamed::Served : Streamed::Closed;
}

// After the response: the rest of the body the handler left is read and dropped, and what was
// read past its end goes back into the connection's buffer, after the request's records. False:
// the body did not end as it should, and the connection is closed.
bool WorkerLoop::finish_streamed_body(Connection& c) {
  StreamedBody& body = *streamed_;
  if (!body.finish()) {
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
void WorkerLoop::keep_upload_memory() {
  app::HostAccess::swap_body(request_, upload_memory_);
  upload_memory_.clear(); // a spilled body's file is closed; the memory's capacity stays
  if (upload_memory_.memory().capacity() > 2 * request_.spill_threshold())
    upload_memory_.release(0);
  upload_memory_used_ns_ = process_manager::monotonic_ns();
}

// Recycling checks after each request. ru_maxrss is one getrusage() (no file to open and parse,
// unlike /proc/self/statm), and is only asked for when --max-rss is set.
void WorkerLoop::count_request() {
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
