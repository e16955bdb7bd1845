// --threads T: a complete request goes to a handler thread (handler_threads.hpp), the loop goes
// on. The seam is two queues: a lane holds one complete request for its thread (decoded here,
// views into the connection's buffer, which nothing else touches until the lane is back), and
// the lane's output and "done" come back through the eventfd. The loop writes every byte.
//
// Admission: a worker whose threads are all busy takes no request: it stops accepting, and a
// request that completes on one of its kept connections goes to a free worker with its bytes
// (the handoff channel) when there is one, else waits here for the first thread to free.
//
// --request-timeout: a request on a thread that runs past it is cut here (its client gets a
// 504, or a cut response when its head went out), the worker takes no more work, and the
// master, which sees the thread's slot overrun too, takes one stack of all threads and stops
// the worker gracefully: its other requests finish. The stuck thread ends with the process.
//
// A response whose client reads slower than its thread writes is cut at --write-timeout, as a
// response written by the loop without threads; an event stream quiet for --event-heartbeat
// gets a heartbeat comment from the loop (keep_streams_alive).
#include "app/host_access.hpp"
#include "fcgi_host/net/socket_write.hpp"
#include "fcgi_host/observe/access_log.hpp"
#include "fcgi_host/observe/status_page.hpp"
#include "fcgi_host/protocol/records.hpp"
#include "fcgi_host/sys_error.hpp"
#include "fcgi_host/worker/large_buffers.hpp"
#include "fcgi_host/worker/worker_loop.hpp"
#include "process_manager/clock.hpp"
#include "process_manager/crash_report.hpp"
#include "process_manager/log.hpp"
#include "process_manager/request_id.hpp"

#include <cerrno>
#include <exception>
#include <string_view>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace fcgi_host {
namespace {

using process_manager::WorkerState;
using Kind = ClientErrorLog::Kind;

// What keep_streams_alive() sends on an idle event stream: an SSE comment.
constexpr std::string_view kHeartbeatComment = ": heartbeat\n\n";

// Called from the crash handler in the faulting thread: its own request's route and identity.
void describe_thread_for_crash(process_manager::WorkerSlot&, const void* threads) {
  auto& t = *static_cast<HandlerThreads*>(const_cast<void*>(threads));
  if (Lane* lane = t.lane_of_thread(static_cast<pid_t>(gettid())))
    describe_request_for_crash(lane->slot, lane->request);
}

} // namespace

std::string WorkerLoop::start_threads() {
  threads_ = std::make_unique<HandlerThreads>(slot_, host_, settings_.observe, settings_.threads);
  slot_.threads.store(settings_.threads, std::memory_order_relaxed);
  for (std::size_t i = 0; i < threads_->size(); ++i) {
    Lane& lane = threads_->lane(i);
    lane.request.set_spill_threshold(settings_.limits.spill_threshold);
    lane.response.set_file_offload(&settings_.file_offload);
    lane.codec.set_head_limit(settings_.max_response_head);
    lane.id_prefix = id_prefix_;
    app::HostAccess::set_id_source(
        lane.request,
        [](const void* l, char* out) {
          auto& lane = *static_cast<const Lane*>(l);
          process_manager::format_generated_id(lane.id_prefix, lane.request_number, out);
        },
        &lane);
    lane.metrics.measure_cpu_on_other_thread(); // the handler thread's CPU clock
  }
  process_manager::set_crash_describer(describe_thread_for_crash, threads_.get());
  std::string error = threads_->start(handler_, thread_safe_, *make_handler_,
                                      [this](Lane& lane) { respond_on_thread(lane); });
  if (!error.empty()) return error;
  if (!epoll_.add(threads_->event_fd(), EPOLLIN)) return sys_error("epoll_ctl", "eventfd");
  return {};
}

// A complete request (not aborted before it ran): to a free thread, or held.
bool WorkerLoop::serve_on_thread(Connection& c) {
  Lane* lane = admitting() ? threads_->idle_lane() : nullptr;
  if (!lane) {
    hold(c);
    return false;
  }
  threads_->take(*lane);
  if (!decode_into(c, *lane)) return false;
  if (!admitting()) set_accepting(false);
  publish_lanes();
  return false; // the connection is the lane's until its request is done
}

// No thread free: a free worker takes the connection with its request, else it waits here.
void WorkerLoop::hold(Connection& c) {
  if (can_hand_off(true) && hand_off(c)) return;
  if (c.in_epoll) epoll_.remove(c.fd);
  c.in_epoll = c.wants_write = false;
  c.phase = Connection::Phase::Queued;
  held_.push_back(c.fd);
}

// A thread freed: the held requests first, in order.
void WorkerLoop::resume_held() {
  while (!held_.empty() && admitting()) {
    Connection* c = table_.find(held_.front());
    held_.pop_front();
    if (!c || c->phase != Connection::Phase::Queued) continue;
    c->phase = Connection::Phase::Reading;
    if (serve_request(*c)) process(*c);
  }
  if (admitting() && !accepting_ && !stopping() && !quarantined_) set_accepting(true);
}

// On the loop: the request into the lane, and what the loop answers itself (a short body, the
// status and ping pages, a request shed by --max-queue-time); the handler's requests go to the
// thread. False: the connection was closed.
bool WorkerLoop::decode_into(Connection& c, Lane& lane) {
  RecordGuard& g = c.guard;
  lane.fd = c.fd;
  lane.cut = false;
  lane.start_ns = process_manager::monotonic_ns();
  c.phase = Connection::Phase::Serving;
  c.lane = static_cast<int>(lane.index);
  if (c.in_epoll) epoll_.remove(c.fd);
  c.in_epoll = c.wants_write = false;
  RequestCodec::Decoded decoded =
      lane.codec.decode(c.fd, c.in.data() + g.request_begin(), g.request_end() - g.request_begin(),
                        g.framing(), lane.start_ns + write_timeout_ns_, lane.request);
  if (decoded == RequestCodec::Decoded::Refused) {
    threads_->release(lane);
    close_connection(c, "the decoder refused a request the record guard accepted");
    return false;
  }
  lane.codec.deliver_to(&HandlerThreads::deliver, &lane);
  lane.whole = decoded == RequestCodec::Decoded::Whole;
  lane.connection = &c;
  app::HostAccess::set_abort_probe(lane.request, probe_aborted, &c);
  Endpoint endpoint =
      lane.whole ? worker_endpoint(settings_.observe, lane.request.path()) : Endpoint::None;
  lane.counted = endpoint == Endpoint::None;
  lane.shed = false;
  lane.queue_ns = -1;
  lane.request_number = ++request_number_;
  process_manager::RequestSlot& rs = lane.slot;
  rs.request_number.store(lane.request_number, std::memory_order_relaxed);
  if (lane.counted) {
    rs.request_start_ns.store(lane.start_ns, std::memory_order_relaxed);
    rs.queue_ns.store(-1, std::memory_order_relaxed);
    // Always (not only with --metrics): request timeouts and crash blocks name the thread's.
    std::string_view method = lane.request.method(), uri = lane.request.uri();
    process_manager::Scoreboard::set_request(rs, method.data(), method.size(), uri.data(),
                                             uri.size(), lane.request.carried_id());
    rs.state.store(WorkerState::Handling, std::memory_order_relaxed);
    lane.metrics.begin(lane.start_ns);
  }
  lane.response.reset(&lane.sink);
  lane.thread_cpu_ns = -1;
  lane.last_output_ns = lane.start_ns;
  Outcome out;
  out.endpoint = endpoint;
  bool on_loop = true;
  if (!lane.whole) {
    lane.response.status = 400;
    lane.response.set_content("Bad Request\n", "text/plain");
  } else if (!lane.counted) {
    answer_endpoint(out, lane.request, lane.response);
  } else if (queue_gate_.admit(lane.request, lane.response)) {
    lane.queue_ns = queue_gate_.last_queue_ns();
    rs.queue_ns.store(lane.queue_ns, std::memory_order_relaxed);
    on_loop = false;
  } else {
    lane.shed = true;
    lane.queue_ns = queue_gate_.last_queue_ns();
  }
  if (on_loop) {
    // Encoded here: the bytes wait in the lane until the loop takes them, below.
    encode(lane);
    {
      std::lock_guard lock(lane.mutex);
      lane.done = true;
    }
    take_lane_output(c, lane);
    return table_.find(c.fd) == &c;
  }
  threads_->hand_over(lane);
  return true;
}

// On the lane's thread: the handler inside its exception boundary, then its response encoded.
void WorkerLoop::respond_on_thread(Lane& lane) {
  // CPU time per route: this thread's own clock (a system call), on the requests the metrics
  // sample (one in kCpuSampleEvery), as the loop does for its own requests without threads.
  const bool sample_cpu = lane.metrics.cpu_due();
  const std::uint64_t cpu_start = sample_cpu ? thread_cpu_ns() : 0;
  try {
    lane.handler->handle(lane.request, lane.response);
  } catch (const std::exception& e) {
    lane.failure = e.what();
  } catch (...) {
    lane.failure = "unknown exception";
  }
  if (!lane.failure.empty()) {
    if (lane.response.head_sent()) {
      lane.failed_after_head = true;
    } else {
      lane.response.reset(&lane.sink);
      lane.response.status = 500;
      lane.response.set_content("Internal Server Error\n", "text/plain");
    }
  }
  if (process_manager::monotonic_ns() - lane.start_ns > kLookForAbortAfterNs &&
      probe_aborted(lane.connection))
    lane.aborted = true;
  lane.encoding_end = true;
  encode(lane);
  if (lane.failed_after_head) lane.response.status = 500; // for the metrics and the access log
  if (sample_cpu) lane.thread_cpu_ns = static_cast<std::int64_t>(thread_cpu_ns() - cpu_start);
}

// The response's bytes through the lane (RequestCodec::deliver_to), then the end of the request.
void WorkerLoop::encode(Lane& lane) {
  if (lane.failed_after_head) {
    lane.codec.abort();
    lane.ending = RequestCodec::Ending::WriteFailed;
    return;
  }
  if (!lane.response.head_sent()) lane.codec.send(lane.response, nullptr);
  lane.refused_head = lane.codec.refused_head();
  if (lane.refused_head) lane.response.status = 500;
  lane.ending = lane.codec.finish();
}

// The eventfd: lanes with output, or done.
void WorkerLoop::on_thread_news() {
  for (Lane* lane : threads_->take_news()) {
    if (lane->cut) {
      // A cut request's thread returned after all: its connection goes now, the lane is free.
      bool done;
      {
        std::lock_guard lock(lane->mutex);
        lane->output.clear();
        done = lane->done;
      }
      HandlerThreads::output_taken(*lane);
      if (!done) continue;
      lane->cut = false;
      --abandoned_;
      if (Connection* c = table_.find(lane->fd)) close_connection(*c);
      lane->slot.request_start_ns.store(0, std::memory_order_relaxed);
      lane->slot.state.store(WorkerState::Idle, std::memory_order_relaxed);
      threads_->release(*lane);
      continue;
    }
    if (Connection* c = table_.find(lane->fd)) take_lane_output(*c, *lane);
  }
  publish_lanes();
  resume_held();
}

// Moves what the lane's thread wrote to the connection (while the connection holds less than
// the bound), writes it, and finishes the request once the thread is done and all is taken.
void WorkerLoop::take_lane_output(Connection& c, Lane& lane) {
  bool done;
  {
    std::lock_guard lock(lane.mutex);
    lane.events = lane.event_stream;
    if (c.backlog.size() < kLaneOutputBound && !lane.output.empty()) {
      lane.last_output_ns = process_manager::monotonic_ns();
      if (c.backlog.empty())
        c.backlog.swap(lane.output);
      else
        c.backlog.append(lane.output);
      lane.output.clear();
    }
    done = lane.done && lane.output.empty();
  }
  HandlerThreads::output_taken(lane);
  if (!c.backlog.empty() && !c.wants_write) {
    long n = write_some(c.fd, c.backlog.data(), c.backlog.size());
    if (n < 0) {
      std::lock_guard lock(lane.mutex);
      lane.client_gone = true; // the thread's next write fails; its request ends
      lane.output.clear();
      c.backlog.clear();
    } else {
      c.backlog.erase(0, static_cast<std::size_t>(n));
    }
    HandlerThreads::output_taken(lane);
    if (!c.backlog.empty()) {
      // The client reads slower than the thread writes: the thread waits (the bound), at most
      // until the response's --write-timeout, as a response written by the loop itself.
      c.deadline_ns = policy_.write_deadline(lane.start_ns);
      watch_for_write(c, true);
    }
  }
  if (done) finish_lane(c, lane);
}

// EPOLLOUT on a connection whose thread still writes: more of it.
void WorkerLoop::write_lane_output(Connection& c) {
  Lane& lane = threads_->lane(static_cast<std::size_t>(c.lane));
  long n = write_some(c.fd, c.backlog.data(), c.backlog.size());
  if (n < 0) {
    std::lock_guard lock(lane.mutex);
    lane.client_gone = true;
    lane.output.clear();
    c.backlog.clear();
  } else {
    c.backlog.erase(0, static_cast<std::size_t>(n));
  }
  HandlerThreads::output_taken(lane);
  if (c.backlog.empty()) {
    epoll_.remove(c.fd);
    c.in_epoll = c.wants_write = false;
  }
  take_lane_output(c, lane);
}

// The thread is done and the loop holds all its bytes: what follows any request, as in
// serve_request(), and the lane is free.
void WorkerLoop::finish_lane(Connection& c, Lane& lane) {
  Outcome out;
  out.endpoint = lane.counted ? Endpoint::None : Endpoint::Status;
  out.whole = lane.whole;
  out.start_ns = lane.start_ns;
  out.failed_after_head = lane.failed_after_head;
  out.ending = lane.write_timed_out ? RequestCodec::Ending::WriteFailed : lane.ending;
  out.aborted = lane.aborted || c.guard.aborted() ||
                (out.ending == RequestCodec::Ending::WriteFailed && !lane.failed_after_head &&
                 !lane.write_timed_out);
  if (!lane.failure.empty())
    client_errors_.write(Kind::Handler, "handler failed on " + std::string(lane.request.method()) +
                                            " " + std::string(lane.request.uri()) +
                                            " (request id " +
                                            std::string(lane.request.request_id()) + ", thread " +
                                            std::to_string(lane.index) + "): " + lane.failure +
                                            (lane.failed_after_head ? " (response cut)" : ""));
  if (lane.refused_head)
    client_errors_.write(Kind::Handler, "response head of " + std::to_string(lane.refused_head) +
                                            " bytes to " + std::string(lane.request.method()) +
                                            " " + std::string(lane.request.uri()) +
                                            " is larger than --max-response-head (" +
                                            std::to_string(settings_.max_response_head) +
                                            "): answered 500");
  app::HostAccess::set_abort_probe(lane.request, nullptr, nullptr);
  lane.metrics.set_cpu_ns(lane.thread_cpu_ns);
  observe(out, lane.request, lane.response, lane.metrics, lane.shed, lane.queue_ns);
  release_large_buffers(lane.request, lane.response);
  if (lane.counted) {
    lane.slot.request_start_ns.store(0, std::memory_order_relaxed);
    process_manager::single_writer_add(slot_.requests, 1);
    lane.slot.state.store(WorkerState::Idle, std::memory_order_relaxed);
    count_request();
  }
  threads_->release(lane);
  c.lane = -1;
  c.phase = Connection::Phase::Reading;
  // keep_or_close() watches the connection again (for writing or reading) as after any request.
  if (c.wants_write) {
    epoll_.remove(c.fd);
    c.in_epoll = c.wants_write = false;
  }
  if (keep_or_close(c, out) && c.phase == Connection::Phase::KeptIdle) process(c);
}

// The worker's state for the pool: busy while every thread is (the pool then grows, pm
// dynamic and ondemand scale on busy threads), otherwise as without threads.
void WorkerLoop::publish_lanes() {
  if (threads_->all_busy() && !stopping())
    slot_.state.store(WorkerState::Handling, std::memory_order_relaxed);
}

// The nearest --request-timeout of a request on a thread, or heartbeat of an idle event stream.
std::uint64_t WorkerLoop::next_lane_deadline() const {
  std::uint64_t earliest = 0;
  auto consider = [&earliest](std::uint64_t due) {
    if (earliest == 0 || due < earliest) earliest = due;
  };
  for (std::size_t i = 0; i < threads_->size(); ++i) {
    const Lane& lane = const_cast<HandlerThreads&>(*threads_).lane(i);
    if (!lane.busy || lane.cut) continue;
    if (request_timeout_ns_) consider(lane.start_ns + request_timeout_ns_);
    if (event_heartbeat_ns_ && lane.events && !lane.write_timed_out)
      consider(lane.last_output_ns + event_heartbeat_ns_);
  }
  return earliest;
}

void WorkerLoop::cut_overrun_requests(std::uint64_t now) {
  if (request_timeout_ns_ == 0) return;
  for (std::size_t i = 0; i < threads_->size(); ++i) {
    Lane& lane = threads_->lane(i);
    if (lane.busy && !lane.cut && now - lane.start_ns > request_timeout_ns_) cut(lane);
  }
}

// --request-timeout: the request ends for its client now (504, or a cut response when its head
// went out); its thread is left to the process's end; the worker takes no more work.
void WorkerLoop::cut(Lane& lane) {
  std::size_t delivered;
  {
    std::lock_guard lock(lane.mutex);
    lane.client_gone = true;
    lane.output.clear();
    delivered = lane.delivered;
  }
  HandlerThreads::output_taken(lane);
  lane.cut = true;
  ++abandoned_;
  quarantined_ = true;
  set_accepting(false);
  if (Connection* c = table_.find(lane.fd)) {
    std::string end;
    if (delivered == 0 && c->backlog.empty()) {
      records::append_error_response(end, c->guard.request_id(), 504);
    } else {
      end.assign(8, '\0'); // a record no web server accepts: the response is seen cut
    }
    c->backlog.clear();
    write_all(c->fd, end.data(), end.size(), static_cast<int>(write_timeout_ns_ / 1'000'000));
    if (c->in_epoll) epoll_.remove(c->fd);
    c->in_epoll = c->wants_write = false;
    ::shutdown(c->fd, SHUT_RDWR); // closed when the thread returns, or with the process
  }
  client_errors_.write(Kind::Handler,
                       "request " + std::string(lane.request.method()) + " " +
                           std::string(lane.request.uri()) + " (request id " +
                           std::string(lane.request.request_id()) + ", thread " +
                           std::to_string(lane.index) + ") cut after --request-timeout (" +
                           process_manager::seconds_text(request_timeout_ns_) +
                           "): answered 504; the worker takes no more requests and is replaced");
  // Its kept connections go to workers that go on.
  if (can_hand_off(false)) hand_off_waiting(-1);
}

// An event stream whose handler sent nothing for event_heartbeat_ns: a comment record (":
// heartbeat") so that the web server and the client keep it open (nginx's
// fastcgi_read_timeout). Only between two events (LaneSink: the handler's last write was
// flushed whole), and only when the client took all before it; a handler that is writing, or
// waits for a slow client, is left alone and looked at again after another interval.
void WorkerLoop::keep_streams_alive(std::uint64_t now) {
  if (event_heartbeat_ns_ == 0) return;
  for (std::size_t i = 0; i < threads_->size(); ++i) {
    Lane& lane = threads_->lane(i);
    if (!lane.busy || lane.cut || !lane.events || lane.write_timed_out ||
        lane.last_output_ns + event_heartbeat_ns_ > now)
      continue;
    lane.last_output_ns = now;
    Connection* c = table_.find(lane.fd);
    if (!c || !c->backlog.empty()) continue;
    {
      std::lock_guard lock(lane.mutex);
      if (!lane.between_events || lane.done || lane.client_gone || !lane.output.empty()) continue;
      records::append_record(lane.output, records::Type::Stdout, c->guard.request_id(),
                             kHeartbeatComment);
    }
    take_lane_output(*c, lane);
  }
}

// A response on a thread whose client did not read it within --write-timeout: it ends there,
// with one line, as without threads; the thread's next write fails (it waits no more), and the
// connection closes when it returns.
void WorkerLoop::write_timed_out(Connection& c) {
  Lane& lane = threads_->lane(static_cast<std::size_t>(c.lane));
  {
    std::lock_guard lock(lane.mutex);
    lane.client_gone = true;
    lane.output.clear();
  }
  HandlerThreads::output_taken(lane);
  lane.write_timed_out = true;
  c.backlog.clear();
  epoll_.remove(c.fd);
  c.in_epoll = c.wants_write = false;
  ::shutdown(c.fd, SHUT_RDWR);
  client_errors_.write(
      Kind::Connection,
      "response to " + std::string(lane.request.method()) + " " + std::string(lane.request.uri()) +
          " (request id " + std::string(lane.request.request_id()) + ", thread " +
          std::to_string(lane.index) + ") cut: the client did not read it within --write-timeout");
  take_lane_output(c, lane); // a thread already done: the request ends now
}

} // namespace fcgi_host
