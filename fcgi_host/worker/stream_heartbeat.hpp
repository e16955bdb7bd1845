#pragma once
// --event-heartbeat with one thread: the handler runs inline on the worker's loop, so while it
// waits between two events nothing else in the worker runs. This small thread, started with the
// worker's first event stream, sends the heartbeat comment that the loop sends for a handler
// thread's stream (threaded_requests.cpp, keep_streams_alive): after --event-heartbeat without
// output, between two events only (the lane's sink says when: LaneSink), under the lane's mutex,
// which the handler's own writes to the stream also take.
#include <cstdint>
#include <thread>

namespace fcgi_host {

struct Lane;

class StreamHeartbeat {
public:
  StreamHeartbeat(Lane& lane, std::uint64_t every_ns) : lane_(lane), every_ns_(every_ns) {}
  ~StreamHeartbeat();
  StreamHeartbeat(const StreamHeartbeat&) = delete;
  StreamHeartbeat& operator=(const StreamHeartbeat&) = delete;

  // An event stream began on the lane (the lane's mutex held): the thread starts, or looks again.
  void stream_began();

private:
  void run();

  Lane& lane_;
  const std::uint64_t every_ns_;
  std::thread thread_;
  bool quit_ = false; // under the lane's mutex
};

} // namespace fcgi_host
