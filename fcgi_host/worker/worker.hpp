#pragma once
// One worker process: accepts on the shared socket, reads requests, runs the handler.
#include "app/handler.hpp"
#include "fcgi_host/config/limits.hpp"
#include "fcgi_host/net/client_filter.hpp"
#include "fcgi_host/observe/metrics.hpp"
#include "fcgi_host/observe/queue_time.hpp"
#include "fcgi_host/protocol/record_guard.hpp"
#include "fcgi_host/sandbox/sandbox_settings.hpp"
#include "fcgi_host/worker/crash_capture.hpp"
#include "fcgi_host/worker/handler_factory.hpp"
#include "fcgi_host/worker/handoff_channel.hpp"
#include "fcgi_host/worker/process_setup.hpp"
#include "process_manager/worker_context.hpp"

#include <functional>
#include <memory>

namespace fcgi_host {

struct WorkerSettings {
  int listen_fd = -1;
  // The worker process's own copy of listen_fd: closed as soon as the worker stops, so that the
  // socket closes for good (refusing new connections) the moment the last stopping worker has
  // taken what was queued, not when it exits. False in an in-process host (not its fd).
  bool close_listen_fd_on_stop = false;
  HandoffChannel handoff; // disabled in an in-process host
  Limits limits;
  ServerValues server_values;
  ClientFilter allow_clients;
  Credentials credentials;
  bool clear_env = false;
  std::vector<std::string> env;
  // Recycling: the worker stops accepting, finishes what it holds and exits 0 (the master
  // respawns it at once) after max_requests + a random 0..max_requests_jitter requests, or
  // after the request that took its peak RSS past max_rss_kib. 0: off.
  unsigned long max_requests = 0;
  unsigned long max_requests_jitter = 0;
  long max_rss_kib = 0;
  // Handler threads (--threads): the loop's thread runs lane 0's requests, the others go to them
  // (handler_threads.hpp, loop_relay.hpp).
  // 1: the loop runs the handler itself, as without threads.
  unsigned threads = 1;
  // One handler instance serves every thread (a thread-safe plugin or built-in app); otherwise
  // each thread gets its own from the factory.
  bool handler_thread_safe = false;
  // --request-timeout, enforced by the worker itself for a request on a handler thread: the
  // request is cut and the worker takes no more work (the master stops it gracefully). 0: off.
  std::uint64_t request_timeout_ns = 0;
  // An event stream on a handler thread that sent nothing for this long gets a heartbeat
  // comment from the loop (docs/threads.md). 0: none.
  std::uint64_t event_heartbeat_ns =
      std::uint64_t{app::EventStream::kHeartbeatEverySeconds} * 1'000'000'000u;
  // --idle-work-after: a lane without a request this long runs the handler's on_idle() once
  // (0: never); --trim-when-idle: and malloc_trim(0).
  std::uint64_t idle_work_after_ns = default_size("idle-work-after") * 1'000'000;
  bool trim_when_idle = false;
  // The health gate (--ready-path): empty, or a path the handler must answer 2xx before the
  // worker serves (worker/ready_check.hpp).
  std::string ready_path;
  // A response head larger than this is answered 500 (--max-response-head).
  std::size_t max_response_head = default_size("max-response-head");
  app::FileOffload file_offload; // how Response::send_file() answers
  ObservabilitySettings observe; // metrics, status and ping paths, slow log
  AdmissionSettings admission;   // --max-queue-time shedding
  CaptureSettings capture;       // --capture-crashes (off: capture.dir empty)
  SandboxSettings sandbox;       // --sandbox, --private-tmp (sandbox/sandbox.hpp)
  int output_fd = -1;            // where stdout and stderr go (OutputCapture), -1: inherited
};

// The worker's entry point; returns its exit code (process_manager/exit_codes.hpp).
int run_worker(const process_manager::WorkerContext& context, const WorkerSettings& settings,
               const HandlerFactory& make_handler);

} // namespace fcgi_host
