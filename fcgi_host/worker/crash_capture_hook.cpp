// --capture-crashes in the worker: which bytes are the request in flight. Nothing here runs
// per request: the crash recorder finds them, at a crash, from the connection whose handler
// runs (serving_fd_) and the record guard's view of its buffer.
#include "fcgi_host/worker/worker_loop.hpp"
#include "process_manager/crash_report.hpp"

#include <unistd.h>

namespace fcgi_host {

std::string WorkerLoop::arm_crash_capture() {
  if (settings_.capture.dir.empty()) return {};
  crash_capture_ = std::make_unique<CrashCapture>();
  if (std::string error = crash_capture_->open(settings_.capture); !error.empty()) return error;
  process_manager::set_crash_recorder(&WorkerLoop::capture_in_flight, this);
  return {};
}

// From the fatal-signal handler (process_manager/crash_report.hpp): reads the worker's fields
// and hands the bytes to CrashCapture, which copies them before it looks at them.
void WorkerLoop::capture_in_flight(process_manager::WorkerSlot& slot, int sig, void* self) {
  WorkerLoop& w = *static_cast<WorkerLoop*>(self);
  int fd = w.serving_fd_;
  if (w.threads_) { // the faulting thread's request
    Lane* lane = w.threads_->lane_of_thread(static_cast<pid_t>(gettid()));
    fd = lane && lane->busy ? lane->fd : -1;
  }
  Connection* in_flight = fd >= 0 ? w.table_.find(fd) : nullptr;
  if (!in_flight) {
    slot.crash_note[0] = '\0'; // no request of a handler in flight: nothing to keep
    return;
  }
  Connection& c = *in_flight;
  const std::size_t begin = c.guard.request_begin(), end = c.guard.request_end();
  if (end <= begin || end > c.in.size()) return;
  w.crash_capture_->save(slot, sig, c.in.data() + begin, end - begin);
}

} // namespace fcgi_host
