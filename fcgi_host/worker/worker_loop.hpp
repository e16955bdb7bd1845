#pragma once
// The worker's event loop (private to worker/): the connection loop over the shared listening
// socket, the handoff channel, the worker's signals and its connections. A complete request is
// served on a lane (request_lane.hpp) by one set of steps, whatever --threads says; the handler
// runs inline (one thread) or on the lane's thread. Its parts, each in a file of its own:
//   worker_loop.cpp          the loop: wait, dispatch, the fast path, signals, the stop
//   connection_events.cpp    what one connection's events do: accept, read, frame, wait, write,
//                            refuse, close, deadlines, eviction
//   serve_request.cpp        the steps of one complete request: begin, respond, finish
//   threaded_requests.cpp    what handler threads add: hand-over, holding, the output hand-back,
//                            the cut at --request-timeout, event-stream heartbeats
//   worker_handoff.cpp       when and how a kept connection moves to another worker
//   idle_work.cpp            the handler's on_idle() between requests (--idle-work-after)
// and the pieces it is built of: ConnectionTable (the connections), ConnectionPolicy (pure:
// deadlines and eviction), EpollSet, WorkerSignals, HandoffChannel, SlowHandlerWatch.
#include "app/handler.hpp"
#include "fcgi_host/observe/client_error_log.hpp"
#include "fcgi_host/observe/metrics.hpp"
#include "fcgi_host/observe/queue_time.hpp"
#include "fcgi_host/observe/status_page.hpp"
#include "fcgi_host/protocol/request_codec.hpp"
#include "fcgi_host/worker/accept_probe.hpp"
#include "fcgi_host/worker/connection.hpp"
#include "fcgi_host/worker/connection_policy.hpp"
#include "fcgi_host/worker/connection_table.hpp"
#include "fcgi_host/worker/epoll_set.hpp"
#include "fcgi_host/worker/handler_threads.hpp"
#include "fcgi_host/worker/periodic_timer.hpp"
#include "fcgi_host/worker/request_lane.hpp"
#include "fcgi_host/worker/slow_handler_watch.hpp"
#include "fcgi_host/worker/stream_heartbeat.hpp"
#include "fcgi_host/worker/streamed_body.hpp"
#include "fcgi_host/worker/worker.hpp"
#include "fcgi_host/worker/worker_signals.hpp"
#include "process_manager/worker_context.hpp"

#include <deque>
#include <memory>
#include <string>
#include <vector>

namespace fcgi_host {

class AccessLog;

// Request::aborted() for a connection (its argument): FCGI_ABORT_REQUEST or a close.
bool probe_aborted(void* connection);

// From a crash handler: the request's method, URI, id and route into its slot (async-signal-safe).
void describe_request_for_crash(process_manager::RequestSlot& slot, const app::Request& request);

class WorkerLoop {
public:
  // `make_handler` and `thread_safe`: with --threads above 1, each handler thread's instance
  // (its own from the factory, or `handler` shared when it is thread-safe).
  WorkerLoop(const process_manager::WorkerContext& context, const WorkerSettings& settings,
             app::Handler& handler, const HandlerFactory* make_handler = nullptr,
             bool thread_safe = false);
  ~WorkerLoop();
  WorkerLoop(const WorkerLoop&) = delete;
  WorkerLoop& operator=(const WorkerLoop&) = delete;

  int run();

private:
  enum class Stop { No, Drain, Quit };

  // ---- the loop (worker_loop.cpp)
  std::string setup();
  // After a request past --max-requests or --max-rss; inline, since the loop asks at every turn.
  bool recycle_if_due() { return recycle_reason_ && !stopping() && begin_recycling(); }
  bool begin_recycling();
  // The fast path, only with nothing open; inline, since the loop asks at every turn.
  bool accept_without_waiting() { return table_.open() == 0 && accepting_ && accept_queued(); }
  bool accept_queued();
  bool wait_and_dispatch();
  void dispatch(int fd);
  int next_timeout_ms();
  void set_accepting(bool on);
  void watch_channel(bool on);
  void take_signals();
  void begin_stop(Stop how);
  // Connections of requests cut by --request-timeout whose threads never returned stay open
  // (their threads may still look at them) and do not hold a stop.
  // A handler still at work after its Response::finish() holds the stop as a request does.
  bool finished() const {
    return stop_ != Stop::No && table_.open() == abandoned_ && working_after_response_ == 0;
  }
  bool done() { return finished() && !take_left_in_channel(); }
  bool stopping() const { return stop_ != Stop::No; }
  // A lane is free for a new request (a cut request stops the worker's admissions).
  bool admitting() const { return !all_lanes_busy() && !quarantined_; }

  // ---- one connection's events (connection_events.cpp)
  bool accept_one();
  bool take_over_one();
  // A stop of the whole host (TERM): the connections other workers passed on and nobody took.
  bool take_left_in_channel();
  Connection& add_connection(int fd, std::uint64_t now);
  // Inline: on the path of every request on a kept connection.
  void on_ready(Connection& c) {
    if (c.phase == Connection::Phase::Writing)
      continue_writing(c);
    else if (c.phase == Connection::Phase::Serving || c.phase == Connection::Phase::Queued)
      on_serving_ready(c); // (its pumped body is the lane's now, or waits for one)
    else if (c.pump)
      pump_body(c);
    else if (read_more(c))
      process(c);
  }
  bool read_more(Connection& c);
  void process(Connection& c);
  void flush_replies(Connection& c);
  void watch(Connection& c);
  bool watch_readable(Connection& c);
  void watch_for_write(Connection& c, bool on);
  void continue_writing(Connection& c);
  void reject(Connection& c);
  void reject(Connection& c, int status, const std::string& reason);
  // A large body gathered as it arrives (body_pump.hpp), for a handler that takes it whole.
  bool start_pump(Connection& c);
  void pump_body(Connection& c);
  void body_arrived(Connection& c, std::string_view leftover);
  void close_connection(Connection& c, const std::string& why = {});
  void forget_connection(Connection& c);
  // The slot shows how many connections the worker holds (status page, metrics).
  void publish_connections() {
    slot_.connections.store(static_cast<std::uint32_t>(table_.open()), std::memory_order_relaxed);
  }
  void make_room(std::uint64_t now);
  void expire_deadlines(std::uint64_t now);
  void on_deadline(Connection& c, std::uint64_t now);

  // ---- moving kept connections (worker_handoff.cpp)
  bool can_hand_off(bool need_free) const;
  bool hand_off(Connection& c);
  void hand_off_waiting(int except_fd);
  bool release_when_stopping(Connection& c, bool idle_deadline);
  void on_nudge(std::uint64_t request_start_ns);

  // ---- --threads: requests on handler threads (threaded_requests.cpp)
  std::string start_threads();
  bool hand_to_thread(Connection& c, Lane& lane);
  bool run_on_loop_thread(Connection& c, Lane& lane);
  void after_regent();
  bool finish_on_loop_thread(Connection& c, Lane& lane, std::uint64_t cpu_start);
  void regent_turn();
  void hold(Connection& c);
  void resume_held();
  void respond_on_thread(Lane& lane);
  void on_thread_news();
  // `lane_is_ours`: lane 0 after its handler on the loop's thread (no other thread has it).
  void on_lane_news(Lane& lane, bool lane_is_ours = false);
  void end_cut_lane(Lane& lane);
  void on_serving_ready(Connection& c);
  void take_lane_output(Connection& c, Lane& lane, bool lane_is_ours = false);
  void write_lane_output(Connection& c);
  void finish_lane(Connection& c, Lane& lane);
  bool let_connection_go(Connection& c, Lane& lane);
  void on_lane_without_connection(Lane& lane);
  void publish_lanes();
  std::uint64_t next_lane_deadline() const;
  void cut_overrun_requests(std::uint64_t now);
  void cut(Lane& lane);
  void keep_streams_alive(std::uint64_t now);
  void write_timed_out(Connection& c);

  // ---- --idle-work-after: the handler's on_idle() between requests (idle_work.cpp)
  void look_at_idle_lanes(std::uint64_t now);
  void start_idle_job(Lane& lane);
  void idle_work_on_loop_thread(Lane& lane);
  void end_idle_job(Lane& lane);
  static void run_idle_work(Lane& lane, bool trim);
  void count_idle_work(std::uint64_t started_ns);

  // ---- --capture-crashes (crash_capture_hook.cpp)
  std::string arm_crash_capture();
  static void capture_in_flight(process_manager::WorkerSlot& slot, int sig, void* self);

  // ---- one request, on a lane (serve_request.cpp)
  // `lane`: the one a streamed body's request was peeked into; otherwise a free one is taken
  // (none: the request is held or handed off). False when the connection was closed, moved, or
  // is a handler thread's until its request is done.
  bool serve_request(Connection& c, Lane* lane = nullptr);
  enum class Begun { Closed, Answered, ForHandler };
  // Inline: only serve_request() calls it (serve_request.cpp), once per request.
  inline Begun begin(Connection& c, Lane& lane);
  void answer_endpoint(Lane& lane);
  // The handler inside its exception boundary, then its response encoded: inline with one
  // thread, on the lane's thread with more (it touches the lane and nothing of the loop).
  static void respond(Lane& lane);
  // respond(), folded into serve_request() with one thread (serve_request.cpp's alone).
  static inline void respond_inline(Lane& lane);
  static void call_handler(Lane& lane);
  static std::uint64_t start_cpu_sample(Lane& lane);
  static void end_cpu_sample(Lane& lane, std::uint64_t start);
  static void end_response(Lane& lane);
  // Response::finish(), on the thread that runs the handler (LaneEnd): it touches the lane only,
  // but with one thread, where the loop is the handler's, the connection too.
  void end_response_early(Lane& lane);
  void pass_on_finished_connection(Lane& lane);
  friend class LaneEnd;
  bool finish(Connection& c, Lane& lane);
  bool finish_without_connection(int fd, const Connection& c, Lane& lane);
  void keep_request_bytes(Connection& c, Lane& lane);
  void settle_ending(Connection& c, Lane& lane);
  void finish_work(Lane& lane, bool pumped);
  inline void finish_work_inline(Lane& lane, bool pumped); // finish_work(), folded into finish()
  void report_failures(Lane& lane);
  void observe(Lane& lane);
  void log_access(const Lane& lane, bool ran);
  bool keep_or_close(Connection& c, Lane& lane);
  bool keep_or_close(Connection& c, RequestCodec::Ending ending, std::uint64_t start_ns,
                     const StreamedBody* streamed, bool body_ended);
  Lane* idle_lane();
  void take_lane(Lane& lane);
  void release_lane(Lane& lane);
  bool all_lanes_busy() const { return busy_lanes_ == lane_count_; }
  // A request whose handler reads its body as it arrives (Handler::streams_body): served as
  // soon as its params are in. No: not such a request (it waits for its body as usual).
  enum class Streamed { No, Served, Closed };
  Streamed serve_streamed(Connection& c);
  bool finish_streamed_body(Connection& c, const StreamedBody& body, bool ended);
  void keep_upload_memory(Lane& lane);
  inline void count_request(); // (serve_request.cpp's alone, folded into finish_work())

  const process_manager::WorkerContext& context_;
  process_manager::WorkerSlot& slot_;
  const WorkerSettings& settings_;
  app::Handler& handler_;
  int listen_fd_; // -1 once closed by a stopping worker
  const process_manager::Scoreboard& scoreboard_;
  std::size_t slot_index_;
  std::uint32_t generation_;
  HostSlot& host_;       // the host's counters of this worker
  QueueGate queue_gate_; // queue time, and --max-queue-time shedding
  const ConnectionPolicy policy_;
  std::uint64_t write_timeout_ns_;

  EpollSet epoll_;
  WorkerSignals signals_;
  bool accepting_ = false;        // the listening socket is in epoll
  bool watching_channel_ = false; // the handoff channel is in epoll
  std::uint64_t accept_paused_until_ = 0;
  Stop stop_ = Stop::No;
  std::uint64_t stop_serving_until_ = 0;
  unsigned accepts_since_signal_check_ = 0;
  AcceptProbe accept_probe_;        // whether the fast path tries accept4 before waiting
  unsigned long request_limit_ = 0; // 0: no --max-requests
  unsigned long served_ = 0;
  // The made-up request id of requests that carry none (process_manager/request_id.hpp).
  std::uint64_t id_prefix_ = 0;
  std::uint64_t request_number_ = 0;
  const char* recycle_reason_ = nullptr; // set after a request; acted on at the top of run()

  ConnectionTable table_;     // guarded by watch_'s table lock
  std::string handoff_bytes_; // scratch for a received connection's bytes
  int serving_fd_ = -1;       // the connection whose request runs; guarded by the table lock
  SlowHandlerWatch watch_;    // after table_: its thread ends before the table goes

  // The lanes: one per handler thread; with one thread, the one run inline.
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::size_t busy_lanes_ = 0;
  std::size_t lane_count_ = 0; // lanes_.size(), kept: admitting() is asked on every request
  bool publish_every_request_; // the slot names each request (--metrics, or threads)
  // The memory of the last body gathered by a pump, kept for the next (up to --spill-threshold;
  // freed after kUploadMemoryKeepNs without one): a large upload's fresh pages cost more than
  // its copy from the kernel.
  app::SpillBuffer upload_memory_;
  std::uint64_t upload_memory_used_ns_ = 0; // 0: none kept
  ClientErrorLog client_errors_;
  AccessLog& access_log_; // AccessLog::get(), kept: observe() asks it after every request
  std::unique_ptr<CrashCapture> crash_capture_; // null unless --capture-crashes

  // --threads above 1 (null otherwise: the loop runs the handler itself, on lanes_[0]).
  const HandlerFactory* make_handler_;
  bool thread_safe_;
  std::unique_ptr<HandlerThreads> threads_;
  // Lane 0 runs on the loop's thread, the relay standing by (loop_relay.hpp). After its regent
  // had to take the loop, the next requests go to the other lanes first: a handler that waits
  // (a database) is best on a thread of its own, and the backoff doubles at each takeover.
  LoopRelay relay_;
  unsigned loop_lane_backoff_ = 0;
  bool look_at_signals_ = false; // after the regent held the loop (after_regent())
  static constexpr unsigned kMaxLoopLaneBackoff = 1023;
  // One thread and --event-heartbeat: the inline lane's (null otherwise).
  std::unique_ptr<StreamHeartbeat> heartbeat_;
  std::deque<int> held_;      // connections whose complete request waits for a thread
  std::size_t abandoned_ = 0; // connections of cut requests whose threads never returned
  // Lanes whose handler goes on after Response::finish() let their connection go (not cut).
  std::size_t working_after_response_ = 0;
  bool quarantined_ = false; // a request was cut: no new work until the master stops us
  std::uint64_t request_timeout_ns_ = 0;
  std::uint64_t event_heartbeat_ns_ = 0;
  // --idle-work-after: the loop looks at its lanes for idle work when it fires (unstarted: off).
  PeriodicTimer idle_timer_;
};

} // namespace fcgi_host
