#pragma once
// The worker loop (private to worker/): one event loop over the shared listening socket, the
// handoff channel, the worker's signals and its connections; a request's handler runs when the
// request is complete, one at a time. See worker_loop.cpp for the loop, serve_request.cpp for
// the steps of one request.
#include "app/handler.hpp"
#include "fcgi_host/observe/client_error_log.hpp"
#include "fcgi_host/observe/metrics.hpp"
#include "fcgi_host/observe/queue_time.hpp"
#include "fcgi_host/protocol/request_codec.hpp"
#include "fcgi_host/worker/connection.hpp"
#include "fcgi_host/worker/worker.hpp"
#include "process_manager/worker_context.hpp"

#include <memory>
#include <mutex>
#include <signal.h>
#include <thread>
#include <vector>

namespace fcgi_host {

class Worker {
public:
  Worker(const process_manager::WorkerContext& context, const WorkerSettings& settings,
         app::Handler& handler);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  int run();

private:
  enum class Stop { No, Drain, Quit };

  // ---- the loop (worker_loop.cpp)
  std::string setup();
  bool wait_and_dispatch();
  bool accept_one();
  void take_over_one();
  Connection& add_connection(int fd, std::uint64_t now);
  void set_accepting(bool on);
  void watch_channel(bool on);
  bool read_more(Connection& c);
  void process(Connection& c);
  void flush_replies(Connection& c);
  void watch(Connection& c);
  bool watch_readable(Connection& c);
  void watch_for_write(Connection& c, bool on);
  void continue_writing(Connection& c);
  void reject(Connection& c);
  void close_connection(Connection& c, const std::string& why = {});
  void forget_connection(Connection& c);
  void make_room(std::uint64_t now);
  void expire_deadlines();
  int next_timeout_ms();
  void take_signals();
  void begin_stop(Stop how);
  bool finished() const { return stop_ != Stop::No && open_ == 0; }
  void publish_connections();

  // ---- moving kept connections (worker_handoff.cpp)
  bool can_hand_off(bool need_free) const;
  bool hand_off(Connection& c);
  void hand_off_waiting(int except_fd);
  bool release_when_stopping(Connection& c, bool idle_deadline);
  void start_observer();
  void stop_observer();
  void observe_slow_handlers();

  // ---- --capture-crashes (crash_capture_hook.cpp)
  std::string arm_crash_capture();
  static void capture_in_flight(process_manager::WorkerSlot& slot, int sig, void* self);

  // ---- one request (serve_request.cpp)
  bool serve_request(Connection& c);
  struct Outcome;
  bool decode(Connection& c, Outcome& out);
  void run_handler(Outcome& out);
  void answer_endpoint(Outcome& out);
  void send(Connection& c, Outcome& out);
  void observe(const Outcome& out);
  bool keep_or_close(Connection& c, Outcome& out);
  void count_request();

  const process_manager::WorkerContext& context_;
  process_manager::WorkerSlot& slot_;
  const WorkerSettings& settings_;
  app::Handler& handler_;
  int listen_fd_; // -1 once closed by a stopping worker
  const process_manager::Scoreboard& scoreboard_;
  std::size_t slot_index_;
  std::uint32_t generation_;
  RequestMetrics metrics_;
  QueueGate queue_gate_; // queue time, and --max-queue-time shedding
  std::uint64_t write_timeout_ns_;

  int epoll_fd_ = -1;
  int signal_fd_ = -1;
  sigset_t signals_{};
  bool accepting_ = false;        // the listening socket is in epoll
  bool watching_channel_ = false; // the handoff channel is in epoll
  std::uint64_t accept_paused_until_ = 0;
  Stop stop_ = Stop::No;
  std::uint64_t stop_serving_until_ = 0;
  unsigned accepts_since_signal_check_ = 0;
  unsigned long request_limit_ = 0; // 0: no --max-requests
  unsigned long served_ = 0;
  // The made-up request id of requests that carry none (process_manager/request_id.hpp).
  std::uint64_t id_prefix_ = 0;
  std::uint64_t request_number_ = 0;
  const char* recycle_reason_ = nullptr; // set after a request; acted on at the top of run()

  std::vector<std::unique_ptr<Connection>> connections_; // indexed by fd
  // Closed connections kept for the next ones, buffers and all: a connection per request
  // (nginx's default) then allocates nothing.
  std::vector<std::unique_ptr<Connection>> spare_connections_;
  // One past the highest fd ever held: the per-wait scans stop there, not at the table's end.
  std::size_t scan_end_ = 0;
  std::size_t open_ = 0;
  std::size_t buffered_ = 0;  // bytes held in connections' input buffers and backlogs
  std::string handoff_bytes_; // scratch for a received connection's bytes

  // The handler runs without table_mutex_; everything else in the worker holds it. The
  // observer thread takes it to move kept connections while a handler runs long.
  std::mutex table_mutex_;
  std::unique_lock<std::mutex> table_lock_{table_mutex_, std::defer_lock}; // the main thread's
  bool in_handler_ = false;    // guarded by table_mutex_
  bool observer_quit_ = false; // guarded by table_mutex_
  int serving_fd_ = -1;        // the connection whose request runs; guarded by table_mutex_
  std::thread observer_;

  RequestCodec codec_;
  app::Request request_;
  app::Response response_;
  ClientErrorLog client_errors_;
  std::unique_ptr<CrashCapture> crash_capture_; // null unless --capture-crashes
};

} // namespace fcgi_host
