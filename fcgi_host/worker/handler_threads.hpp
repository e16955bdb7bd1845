#pragma once
// --threads T: the handler threads of a worker (docs/architecture.md, "Threads"). The worker's
// loop stays the only thread that touches sockets: it frames and decodes a request into a free
// lane, hands the lane to that lane's thread (a queue of one complete request), and the thread
// runs the handler and encodes the response, whose bytes come back through the lane's bounded
// output (deliver()) while the handler still runs, the loop woken by an eventfd. A thread that
// writes faster than its client reads waits on the lane (the bound), not the loop; a gone client
// ends its writes. The loop writes the bytes, takes the lane back when the thread is done, and
// does what it does after any request (metrics, logs, keep or close).
//
// Threads are made in the worker, after fork, with every signal blocked (the loop's signalfd
// takes them); each thread gets its handler instance (its own, or the one shared when the
// handler says it is thread-safe) and calls on_thread_start()/on_thread_stop() on it.
#include "app/handler.hpp"
#include "app/request.hpp"
#include "app/response.hpp"
#include "fcgi_host/observe/metrics.hpp"
#include "fcgi_host/protocol/request_codec.hpp"
#include "fcgi_host/worker/handler_factory.hpp"
#include "process_manager/scoreboard.hpp"

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace fcgi_host {

// What the loop may hold of a lane's output before the thread waits: a streamed response (or a
// large buffered one) costs at most about this much memory beside the socket's own buffer.
inline constexpr std::size_t kLaneOutputBound = 64 * 1024;

class HandlerThreads;
struct Lane;

// The sink a handler thread's streamed response goes through: the codec's, plus what the loop
// needs to keep an idle event stream open with a heartbeat comment of its own, placed between
// two events and never inside one (a flush() ends what the handler wrote: EventStream sends and
// flushes each event whole).
class LaneSink final : public app::BodySink {
public:
  explicit LaneSink(Lane& lane) : lane_(lane) {}
  void send_head(const app::Response& response) override;
  bool send_body(std::string_view chunk) override;
  bool flush() override;

private:
  Lane& lane_;
};

// One handler thread and the request it serves.
struct Lane {
  Lane(HandlerThreads& o, std::size_t i, process_manager::RequestSlot& s, HostSlot& host,
       const ObservabilitySettings& observe)
      : owner(&o), index(i), slot(s), metrics(host, observe) {}

  HandlerThreads* const owner;
  const std::size_t index;
  process_manager::RequestSlot& slot;
  app::Handler* handler = nullptr;
  HandlerPtr own{nullptr, [](app::Handler*) {}};
  RequestCodec codec;
  LaneSink sink{*this}; // the response's (codec.sink() and the event-stream state below)
  app::Request request;
  app::Response response;
  RequestMetrics metrics;
  // The thread's own while it holds a request (hand_over() resets it before giving the job): the
  // thread encodes the response's end, whose bytes within the bound wait for `done` (one wake-up
  // of the loop and one write, not one for the bytes and one for the end).
  bool encoding_end = false;

  // The loop's own fields (no lock: only the loop reads and writes them).
  bool busy = false; // a request was given to this lane and is not taken back yet
  int fd = -1;       // its connection
  bool cut = false;  // the loop ended its request (--request-timeout): nothing more goes out
  std::uint64_t start_ns = 0;
  bool whole = true;   // the body arrived whole
  bool counted = true; // a request of the pool (not the status or ping page)
  bool shed = false;   // --max-queue-time answered it 503 without the handler
  std::int64_t queue_ns = -1;
  std::uint64_t id_prefix = 0;      // of the worker's generated request ids
  std::uint64_t request_number = 0; // this request's
  void* connection = nullptr;       // for the request's abort probe (on the thread)
  std::uint64_t last_output_ns = 0; // when the loop last took bytes of it (heartbeat timing)
  bool events = false;              // the loop saw its head say text/event-stream
  bool write_timed_out = false;     // its client did not read it within --write-timeout

  // Between the loop and the thread, under `mutex`.
  std::mutex mutex;
  std::condition_variable changed;
  bool job = false;                // a request waits for the thread
  bool done = false;               // the thread finished it (its last bytes are in `output`)
  bool client_gone = false;        // the loop will take no more bytes
  bool quit = false;               // the thread ends
  std::string output;              // encoded response bytes the loop has not taken yet
  bool on_thread = false;          // the response is being made on the thread (it may wait)
  bool event_stream = false;       // the head said text/event-stream
  bool between_events = false;     // all the handler wrote is out of the codec, nothing partial:
                                   // a heartbeat record may go next
  std::int64_t thread_cpu_ns = -1; // the thread's CPU time for a sampled request (metrics)
  // What the thread leaves for the loop once done (read after `done`, under the mutex).
  bool failed_after_head = false;
  bool aborted = false; // the client went away while the handler ran
  std::string failure;  // the handler's exception, logged by the loop
  std::size_t refused_head = 0;
  std::size_t delivered = 0; // bytes handed to the loop so far
  RequestCodec::Ending ending = RequestCodec::Ending::Kept;
  std::atomic<pid_t> tid{0}; // the thread's id (gettid()), once it started
  bool in_news = false;      // guarded by HandlerThreads' news mutex
};

class HandlerThreads {
public:
  // `respond` runs on a lane's thread for each request: the handler, then the response encoded
  // (through Lane::codec, whose bytes go to deliver()).
  using Respond = std::function<void(Lane&)>;

  HandlerThreads(process_manager::WorkerSlot& slot, HostSlot& host,
                 const ObservabilitySettings& observe, unsigned threads);
  ~HandlerThreads();
  HandlerThreads(const HandlerThreads&) = delete;
  HandlerThreads& operator=(const HandlerThreads&) = delete;

  // Starts the threads: each gets `shared` (thread-safe) or its own instance from `make`.
  // An error text when a thread could not start or its on_thread_start threw.
  std::string start(app::Handler& shared, bool thread_safe, const HandlerFactory& make,
                    Respond respond);

  std::size_t size() const { return lanes_.size(); }
  Lane& lane(std::size_t i) { return *lanes_[i]; }
  // A lane no request holds, or nullptr when all are busy.
  Lane* idle_lane();
  std::size_t busy() const { return busy_; }
  bool all_busy() const { return busy_ == lanes_.size(); }

  // Loop side. `lane` (idle) holds a request now.
  void take(Lane& lane) {
    lane.busy = true;
    ++busy_;
  }
  // The request decoded into `lane` runs on its thread.
  void hand_over(Lane& lane);
  // The lane is the loop's again (after its request was finished or cut).
  void release(Lane& lane);
  // The fd the loop watches: readable when some lane has output or is done.
  int event_fd() const { return event_fd_; }
  // The lanes that have news since the last call (the eventfd is read).
  std::vector<Lane*> take_news();
  // The loop took `lane`'s output (or gave up on it): the thread may go on writing.
  static void output_taken(Lane& lane);

  // The codec's delivery (RequestCodec::deliver_to), on the thread that encodes: appends to the
  // lane's output and wakes the loop; on a handler thread, waits while the loop holds more than
  // kLaneOutputBound. False once the client is gone.
  static bool deliver(void* lane, const char* data, std::size_t size);

  // The lane whose thread this is (crash handler: async-signal-safe), or nullptr.
  Lane* lane_of_thread(pid_t tid);

private:
  void run(Lane& lane, app::Handler& shared, bool thread_safe, const HandlerFactory& make);
  void notify_loop(Lane& lane);

  process_manager::WorkerSlot& slot_;
  std::vector<std::unique_ptr<Lane>> lanes_;
  std::vector<std::thread> threads_;
  Respond respond_;
  std::size_t busy_ = 0;
  int event_fd_ = -1;
  std::mutex news_mutex_;
  std::vector<Lane*> news_; // guarded by news_mutex_

  // Start-up: each thread reports whether its on_thread_start went well.
  std::mutex start_mutex_;
  std::condition_variable started_;
  std::size_t started_count_ = 0;
  std::string start_error_;
};

} // namespace fcgi_host
