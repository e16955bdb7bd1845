// --threads T: what handler threads add to the one request path (serve_request.cpp). A request
// begun on a lane goes to the lane's thread (handler_threads.hpp), which responds; the loop goes
// on. The seam is two queues: a lane holds one complete request for its thread (views into the
// connection's buffer, which nothing else touches until the lane is back), and the lane's output
// and "done" come back through the eventfd. The loop writes every byte, and finishes the request
// as any other (finish()). The connection stays in epoll while its request runs (no epoll_ctl
// per request); an event on it then takes it out until the lane is done (on_serving_ready).
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
#include "process_manager/exit_codes.hpp"
#include "process_manager/log.hpp"
#include "process_manager/request_id.hpp"

#include <algorithm>
#include <cerrno>
#include <exception>
#include <string_view>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace fcgi_host {
namespace {

using process_manager::WorkerState;

// Called from the crash handler in the faulting thread: its own request's route and identity.
void describe_thread_for_crash(process_manager::WorkerSlot&, const void* threads) {
  auto& t = *static_cast<HandlerThreads*>(const_cast<void*>(threads));
  Lane* lane = t.lane_of_thread(static_cast<pid_t>(gettid()));
  // (In on_idle(), or the loop's thread outside lane 0's handler: no request, or an old one.)
  if (lane && !lane->idle_job && lane->slot.request_start_ns.load(std::memory_order_relaxed))
    describe_request_for_crash(lane->slot, lane->request);
}

} // namespace

std::string WorkerLoop::start_threads() {
  threads_ = std::make_unique<HandlerThreads>(slot_, lanes_);
  slot_.threads.store(settings_.threads, std::memory_order_relaxed);
  process_manager::set_crash_describer(describe_thread_for_crash, threads_.get());
  std::string error = threads_->start(
      handler_, thread_safe_, *make_handler_, [this](Lane& lane) { respond_on_thread(lane); },
      relay_);
  if (!error.empty()) return error;
  if (!epoll_.add(threads_->event_fd(), EPOLLIN)) return sys_error("epoll_ctl", "eventfd");
  ThreadSignalMask mask;
  return relay_.start([this] { regent_turn(); }, [this] { threads_->wake_loop(); });
}

// A request begun on `lane` for its handler: to the lane's thread. The connection is the lane's
// until its request is done (false).
bool WorkerLoop::hand_to_thread(Connection& c, Lane& lane) {
  c.phase = Connection::Phase::Serving;
  c.lane = static_cast<int>(lane.index);
  lane.last_output_ns = lane.start_ns;
  lane.codec.deliver_to(&HandlerThreads::deliver, &lane);
  threads_->hand_over(lane);
  if (!admitting()) set_accepting(false);
  publish_lanes();
  return false;
}

// Lane 0's request, on the loop's own thread (loop_relay.hpp): set up as for a thread, its
// handler run here with the relay standing by. A buffered response is then encoded straight to
// the socket, as with one thread (finish_on_loop_thread()); a streamed one, or one ended by
// Response::finish(), went through the lane as a thread's, and its end is taken as a thread's.
// False, as from hand_to_thread(), unless the connection is here for its next request.
bool WorkerLoop::run_on_loop_thread(Connection& c, Lane& lane) {
  c.phase = Connection::Phase::Serving;
  c.lane = 0;
  lane.last_output_ns = lane.start_ns;
  lane.codec.deliver_to(&HandlerThreads::deliver, &lane);
  HandlerThreads::prepare(lane);
  if (!admitting()) set_accepting(false);
  const std::uint64_t cpu_start = start_cpu_sample(lane);
  relay_.handler_starts();
  if (lane.streamed) relay_.hand_on_now(); // its reader waits on the socket: the loop goes on
  call_handler(lane);
  const bool buffered = !lane.streamed && !lane.response.finished() && !lane.response.head_sent();
  if (!buffered && !lane.response.finished()) end_response(lane); // (while the relay stands by)
  if (relay_.handler_returned()) after_regent();
  if (buffered && !lane.cut) return finish_on_loop_thread(c, lane, cpu_start);
  end_cpu_sample(lane, cpu_start);
  HandlerThreads::loop_lane_done(lane);
  on_lane_news(lane, true);
  publish_lanes();
  if (!held_.empty() || !accepting_) resume_held();
  return false;
}

// The loop is this thread's again, and nothing of the response went out: it is encoded to the
// socket (what it does not take waits in the connection's backlog) and the request finishes, as
// with one thread. The connection is the loop's again (no thread had its bytes).
bool WorkerLoop::finish_on_loop_thread(Connection& c, Lane& lane, std::uint64_t cpu_start) {
  lane.on_thread = false;
  lane.codec.deliver_to(nullptr, nullptr);
  end_response(lane);
  end_cpu_sample(lane, cpu_start);
  c.lane = -1;
  c.phase = Connection::Phase::Reading;
  const bool open = finish(c, lane);
  publish_lanes();
  if (!held_.empty() || !accepting_) resume_held();
  return open;
}

// The loop is this thread's again after the regent held it: lane 0 less for a while (a handler
// that waits is best on a thread of its own), and a look at the signals sent to this thread alone
// (an in-process host's stop, pthread_kill): the regent's epoll_wait polled the signalfd in its
// own context, where they are not pending, and took the wake-up away from this thread's next wait.
void WorkerLoop::after_regent() {
  loop_lane_backoff_ = std::min(2 * loop_lane_backoff_ + 1, kMaxLoopLaneBackoff);
  look_at_signals_ = true;
}

// The regent's turn (loop_relay.hpp): the loop's, while the loop's thread is in lane 0's
// handler. A worker that is done while that handler still runs has cut it (--request-timeout):
// it ends here, as the loop's thread would once its other requests are done (the cut handler's
// thread ends with the process; nothing of the handler is stopped under it).
void WorkerLoop::regent_turn() {
  if (done() && lanes_[0]->cut) {
    client_errors_.flush_due(~std::uint64_t{0});
    ::_exit(process_manager::exit_code::kWorkerDone);
  }
  if (recycle_if_due() || accept_without_waiting()) return;
  if (!wait_and_dispatch()) ::_exit(process_manager::exit_code::kWorkerError);
}

// No thread free: a free worker takes the connection with its request, else it waits here.
// It stays registered in epoll (an event on it takes it out: on_serving_ready()).
void WorkerLoop::hold(Connection& c) {
  if (can_hand_off(true) && hand_off(c)) return;
  c.phase = Connection::Phase::Queued;
  held_.push_back(c.fd);
}

// A thread freed: the held requests first, in order. Accepting again waits for a pause after an
// accept failure (EMFILE) to end, as the loop's own check does.
void WorkerLoop::resume_held() {
  while (!held_.empty() && admitting()) {
    Connection* c = table_.find(held_.front());
    held_.pop_front();
    if (!c || c->phase != Connection::Phase::Queued) continue;
    c->phase = Connection::Phase::Reading;
    if (!watch_readable(*c)) continue;
    if (serve_request(*c)) process(*c);
  }
  if (admitting() && !accepting_ && !stopping() && !quarantined_ &&
      process_manager::monotonic_ns() >= accept_paused_until_)
    set_accepting(true);
}

// On the lane's thread: the request's response (serve_request.cpp), its end delivered with
// `done`; or the lane's idle work.
void WorkerLoop::respond_on_thread(Lane& lane) {
  if (lane.idle_job)
    run_idle_work(lane, settings_.trim_when_idle); // (idle_work.cpp)
  else
    respond(lane);
}

// The eventfd: lanes with output, or done.
void WorkerLoop::on_thread_news() {
  for (Lane* lane : threads_->take_news())
    on_lane_news(*lane);
  publish_lanes();
  resume_held();
}

// A lane's thread wrote output, or is done (lane 0's: the loop's thread, after its handler).
void WorkerLoop::on_lane_news(Lane& lane, bool lane_is_ours) {
  if (lane.cut) {
    end_cut_lane(lane);
    return;
  }
  if (Connection* c = table_.find(lane.fd))
    take_lane_output(*c, lane, lane_is_ours);
  else if (lane.fd < 0)
    on_lane_without_connection(lane);
}

// A cut request's thread returned after all: its connection goes now, the lane is free.
void WorkerLoop::end_cut_lane(Lane& lane) {
  bool done;
  {
    std::lock_guard lock(lane.mutex);
    lane.output.clear();
    done = lane.done;
  }
  HandlerThreads::output_taken(lane);
  if (!done) return;
  lane.cut = false;
  if (lane.fd >= 0) --abandoned_; // (not when it let its connection go at finish())
  if (Connection* c = table_.find(lane.fd)) close_connection(*c);
  lane.responded_ns = 0;
  lane.slot.responded_ns.store(0, std::memory_order_relaxed);
  lane.request_bytes = ByteBuffer{};
  lane.slot.request_start_ns.store(0, std::memory_order_relaxed);
  lane.slot.state.store(WorkerState::Idle, std::memory_order_relaxed);
  lane.streamed.reset();
  release_lane(lane);
}

// Moves what the lane's thread wrote to the connection (while the connection holds less than
// the bound), writes it, and finishes the request once the thread is done and all is taken.
void WorkerLoop::take_lane_output(Connection& c, Lane& lane, bool lane_is_ours) {
  bool done, responded;
  {
    std::unique_lock lock(lane.mutex, std::defer_lock);
    if (!lane_is_ours) lock.lock(); // (lane 0 on the loop's thread after its handler: no lock)
    lane.events = lane.event_stream;
    if (c.backlog.size() < kLaneOutputBound && !lane.output.empty()) {
      if (lane.events) lane.last_output_ns = process_manager::monotonic_ns(); // (heartbeats)
      if (c.backlog.empty())
        c.backlog.swap(lane.output);
      else
        c.backlog.append(lane.output);
      lane.output.clear();
    }
    done = lane.done && lane.output.empty();
    responded = lane.responded && lane.output.empty();
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
  if (done)
    finish_lane(c, lane);
  else if (responded)
    let_connection_go(c, lane);
}

// EPOLLOUT on a connection whose thread still writes: more of it.
void WorkerLoop::write_lane_output(Connection& c) {
  Lane& lane = *lanes_[static_cast<std::size_t>(c.lane)];
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
    const int fd = c.fd;
    watch_for_write(c, false); // written: no more EPOLLOUT
    if (table_.find(fd) != &c) return;
  }
  take_lane_output(c, lane);
}

// The thread is done and the loop holds all its bytes: the request finishes as any other
// (serve_request.cpp), and the connection is watched for reading again.
void WorkerLoop::finish_lane(Connection& c, Lane& lane) {
  c.lane = -1;
  c.phase = Connection::Phase::Reading;
  if (c.wants_write) {
    watch_for_write(c, false);        // (reading again; keep_or_close() decides what follows)
    if (table_.find(lane.fd) != &c) { // it could not be watched again: closed
      lane.streamed.reset();
      release_lane(lane);
      return;
    }
  }
  if (finish(c, lane) && c.phase == Connection::Phase::KeptIdle) process(c);
}

// Response::finish() on a thread, whose response's end the loop took: the connection goes on to
// its next request now (kept or closed as after any response; what the client has not read yet
// is written as a slow client's), while the handler works on and the lane stays busy. The
// request's views stay valid: the buffer they point into becomes the lane's. False: closed.
bool WorkerLoop::let_connection_go(Connection& c, Lane& lane) {
  settle_ending(c, lane);
  lane.pumped = c.pump != nullptr;
  keep_request_bytes(c, lane);
  lane.fd = -1;
  lane.connection = nullptr;
  ++working_after_response_;
  {
    std::lock_guard lock(lane.mutex);
    lane.let_go = true; // (the loop wrote what the socket took of it)
  }
  lane.changed.notify_all(); // the handler's finish() returns
  c.lane = -1;
  c.phase = Connection::Phase::Reading;
  if (c.wants_write) {
    const int fd = c.fd;
    watch_for_write(c, false); // (reading again; keep_or_close() decides what follows)
    if (table_.find(fd) != &c) return false;
  }
  const bool open = keep_or_close(c, lane);
  if (open && c.phase == Connection::Phase::KeptIdle) process(c);
  return open;
}

// News of a lane with no connection: its handler returned after Response::finish() (the lane's
// part of finish follows), or its idle work ended.
void WorkerLoop::on_lane_without_connection(Lane& lane) {
  bool done;
  {
    std::lock_guard lock(lane.mutex);
    lane.output.clear(); // (nothing is written after finish())
    done = lane.done;
  }
  HandlerThreads::output_taken(lane);
  if (!done || !lane.busy) return;
  if (lane.idle_job) {
    end_idle_job(lane);
    return;
  }
  --working_after_response_;
  lane.streamed.reset();
  finish_work(lane, lane.pumped);
}

// An event on a connection whose request waits for a thread or runs on one, other than room to
// write the lane's output: the loop reads nothing of it until the lane is done (an abort, or the
// peer's close, is the thread's to see), so it leaves epoll until then (level-triggered, it would
// fire at every wait); keep_or_close() watches it again.
void WorkerLoop::on_serving_ready(Connection& c) {
  if (c.wants_write) {
    write_lane_output(c);
    return;
  }
  epoll_.remove(c.fd);
  c.in_epoll = false;
}

// The worker's state for the pool: busy while every thread is (the pool then grows, pm
// dynamic and ondemand scale on busy threads), otherwise as without threads.
void WorkerLoop::publish_lanes() {
  if (all_lanes_busy() && !stopping())
    slot_.state.store(WorkerState::Handling, std::memory_order_relaxed);
}

// The nearest --request-timeout of a request on a thread, or heartbeat of an idle event stream.
std::uint64_t WorkerLoop::next_lane_deadline() const {
  std::uint64_t earliest = 0;
  auto consider = [&earliest](std::uint64_t due) {
    if (earliest == 0 || due < earliest) earliest = due;
  };
  for (std::size_t i = 0; i < lanes_.size(); ++i) {
    const Lane& lane = *lanes_[i];
    if (!lane.busy || lane.cut || lane.idle_job) continue;
    if (request_timeout_ns_) consider(lane.start_ns + request_timeout_ns_);
    if (event_heartbeat_ns_ && lane.events && !lane.write_timed_out)
      consider(lane.last_output_ns + event_heartbeat_ns_);
  }
  return earliest;
}

void WorkerLoop::cut_overrun_requests(std::uint64_t now) {
  if (request_timeout_ns_ == 0) return;
  for (std::size_t i = 0; i < lanes_.size(); ++i) {
    Lane& lane = *lanes_[i];
    if (lane.busy && !lane.cut && !lane.idle_job && now - lane.start_ns > request_timeout_ns_)
      cut(lane);
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
  if (lane.fd >= 0)
    ++abandoned_;
  else
    --working_after_response_; // its client has its answer: the handler is cut only

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
  // (The master's line names the request, its thread and the stacks: one line for the event.)
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
  for (std::size_t i = 0; i < lanes_.size(); ++i) {
    Lane& lane = *lanes_[i];
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
  Lane& lane = *lanes_[static_cast<std::size_t>(c.lane)];
  {
    std::lock_guard lock(lane.mutex);
    lane.client_gone = true;
    lane.output.clear();
  }
  HandlerThreads::output_taken(lane);
  lane.write_timed_out = true; // finish() says so in its line
  c.backlog.clear();
  epoll_.remove(c.fd);
  c.in_epoll = c.wants_write = false;
  ::shutdown(c.fd, SHUT_RDWR);
  take_lane_output(c, lane); // a thread already done: the request ends now
}

} // namespace fcgi_host
