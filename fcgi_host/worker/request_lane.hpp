#pragma once
// A lane: one request's state, from its decode to what follows its response (decision 21). Every
// request is served on a lane by one set of steps (serve_request.cpp): begin on the worker's
// loop, respond (the handler, then its response encoded) inline with --threads 1 or on the
// lane's thread with more, finish on the loop. A worker has one lane per handler thread; with
// --threads 1 its one lane is run inline, and the codec writes straight to the socket. After
// Response::finish() a lane can outlive its connection's part of the request: busy until the
// handler returns, with the request's bytes its own (request_bytes), its connection gone on.
//
// The fields below the request's own are the seam between the loop and the lane's thread
// (handler_threads.hpp); an inline lane uses only the mutex and the stream's flags, which keep
// its heartbeats (stream_heartbeat.hpp) apart from the handler's writes.
#include "app/handler.hpp"
#include "app/request.hpp"
#include "app/response.hpp"
#include "fcgi_host/observe/metrics.hpp"
#include "fcgi_host/observe/status_page.hpp"
#include "fcgi_host/protocol/byte_buffer.hpp"
#include "fcgi_host/protocol/request_codec.hpp"
#include "fcgi_host/worker/handler_factory.hpp"
#include "fcgi_host/worker/streamed_body.hpp"
#include "process_manager/scoreboard.hpp"

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

namespace fcgi_host {

class HandlerThreads;
class StreamHeartbeat;
class WorkerLoop;
struct Connection;
struct Lane;

// What the loop may hold of a lane's output before the thread waits: a streamed response (or a
// large buffered one) costs at most about this much memory beside the socket's own buffer.
inline constexpr std::size_t kLaneOutputBound = 64 * 1024;

// What an event stream quiet for --event-heartbeat gets: an SSE comment (threaded_requests.cpp,
// stream_heartbeat.cpp).
inline constexpr std::string_view kHeartbeatComment = ": heartbeat\n\n";

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

// Response::finish(): the response's end, encoded by whoever runs the handler, before it returns
// (serve_request.cpp, WorkerLoop::end_response_early).
class LaneEnd final : public app::ResponseEnd {
public:
  explicit LaneEnd(Lane& lane) : lane_(lane) {}
  void end_response(app::Response& response) override;

private:
  Lane& lane_;
};

struct Lane {
  // `state`: where the request's state is published: the worker's own with one thread, the
  // thread's request slot with several (process_manager/scoreboard.hpp).
  Lane(std::size_t i, process_manager::RequestSlot& s,
       std::atomic<process_manager::WorkerState>& state_of, HostSlot& host,
       const ObservabilitySettings& observe)
      : index(i), slot(s), state(state_of), metrics(host, observe) {
    response.set_end(&end);
  }

  // ---- the request (written by begin on the loop, by respond on the lane's thread)
  const std::size_t index;
  process_manager::RequestSlot& slot;
  std::atomic<process_manager::WorkerState>& state;
  app::Handler* handler = nullptr; // the worker's (inline) or the thread's instance
  HandlerPtr own{nullptr, [](app::Handler*) {}};
  RequestCodec codec;
  LaneSink sink{*this};       // a thread's response goes through it (codec.sink() and heartbeats)
  LaneEnd end{*this};         // Response::finish()
  WorkerLoop* loop = nullptr; // the worker's (what finish() calls)
  app::Request request;
  app::Response response;
  RequestMetrics metrics;
  std::optional<StreamedBody> streamed; // a body the handler reads as it arrives

  bool busy = false; // a request holds the lane (the loop's field)
  int fd = -1;       // its connection
  Connection* connection = nullptr;
  std::string* backlog = nullptr; // inline: the connection's (what the socket did not take)
  std::uint64_t start_ns = 0;
  Endpoint endpoint = Endpoint::None; // status or ping: answered by the host, no request of the
                                      // pool
  bool whole = true;                  // the body arrived whole
  bool shed = false;                  // --max-queue-time answered it 503 without the handler
  std::int64_t queue_ns = -1;
  std::uint64_t id_prefix = 0;      // of the worker's generated request ids
  std::uint64_t request_number = 0; // this request's
  bool counted() const { return endpoint == Endpoint::None; }
  // Where the response's streamed writes go: through the lane's sink on a thread, or inline where
  // heartbeats are on (their timing, and the lock that keeps them apart from the handler's
  // writes); straight to the codec otherwise.
  app::BodySink* response_sink() {
    return owner || heartbeat ? static_cast<app::BodySink*>(&sink) : &codec.sink();
  }

  // What respond leaves for finish.
  std::exception_ptr failure;     // the handler's exception, logged by finish
  bool failed_after_head = false; // ... after its head went out: the response is cut
  bool aborted = false;           // the web server aborted the request or closed (499)
  bool write_timed_out = false;   // its client did not read it within --write-timeout
  std::size_t refused_head = 0;   // the head refused by --max-response-head or as invalid
  RequestCodec::Ending ending = RequestCodec::Ending::Kept;
  std::int64_t thread_cpu_ns = -1; // a thread's CPU time for a sampled request (metrics)
  bool body_ended = true;          // a streamed body ended as it should after the handler
  // Response::finish(): when the response ended, before handle() returned (0: at its return).
  std::uint64_t responded_ns = 0;
  // After Response::finish() with threads, once the connection went on to its next request: the
  // connection's buffer, which the request's views point into (the connection has a copy), and
  // whether its body came through the connection's pump (finish gives its memory back).
  ByteBuffer request_bytes;
  bool pumped = false;
  // --idle-work-after (idle_work.cpp): the request number the loop's last look saw, whether the
  // idle work ran since (once per idle period), and whether the lane is busy with it.
  std::uint64_t idle_seen_request = 0;
  bool idle_done = false;
  bool idle_job = false;

  // ---- --threads: the seam between the loop and the lane's thread (handler_threads.hpp)
  HandlerThreads* owner = nullptr;
  // With one thread and --event-heartbeat: the thread that keeps an idle stream open.
  StreamHeartbeat* heartbeat = nullptr;
  std::uint16_t request_id = 0; // an inline stream's, for its heartbeat records (under `mutex`)
  // The thread's own while it holds a request (hand_over() resets it before giving the job): the
  // thread encodes the response's end, whose bytes within the bound wait for `done` (one wake-up
  // of the loop and one write, not one for the bytes and one for the end).
  bool encoding_end = false;
  // The loop's own.
  bool cut = false;                 // the loop ended its request (--request-timeout)
  std::uint64_t last_output_ns = 0; // when the loop last took bytes of it (heartbeat timing;
                                    // inline: when the handler last wrote, under `mutex`)
  bool events = false;              // the loop saw its head say text/event-stream
  // Between the loop and the thread, under `mutex`.
  std::mutex mutex;
  std::condition_variable changed;
  bool job = false;            // a request waits for the thread
  bool done = false;           // the thread finished it (its last bytes are in `output`)
  bool responded = false;      // Response::finish() ended its response (its end is in `output`)
  bool let_go = false;         // ... and the loop wrote it and let the connection go
  bool client_gone = false;    // the loop will take no more bytes
  bool quit = false;           // the thread ends
  std::string output;          // encoded response bytes the loop has not taken yet
  bool on_thread = false;      // the response is being made on the thread (it may wait)
  bool event_stream = false;   // the head said text/event-stream
  bool between_events = false; // all the handler wrote is out of the codec, nothing partial:
                               // a heartbeat record may go next
  std::size_t delivered = 0;   // bytes handed to the loop so far
  std::atomic<bool> waiting_for_room{false}; // the thread waits for the loop to take output
  std::atomic<pid_t> tid{0};                 // the thread's id (gettid()), once it started
  bool in_news = false;                      // guarded by HandlerThreads' news mutex
};

} // namespace fcgi_host
