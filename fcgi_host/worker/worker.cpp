// The worker process's entry point: privileges, environment, the handler's life, the loop.
#include "fcgi_host/worker/worker.hpp"

#include "fcgi_host/sandbox/sandbox.hpp"
#include "fcgi_host/worker/large_buffers.hpp"
#include "fcgi_host/worker/output_capture.hpp"
#include "fcgi_host/worker/ready_check.hpp"
#include "fcgi_host/worker/worker_loop.hpp"
#include "process_manager/exit_codes.hpp"
#include "process_manager/log.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <malloc.h>
#include <string>

namespace fcgi_host {

using process_manager::LogLevel;
namespace exit_code = process_manager::exit_code;

namespace {

// glibc gives each thread that allocates under contention an arena of its own (up to 8 per
// core), which stay mapped: threads that wait on a database multiply a worker's memory. Two
// arenas keep threads from queueing on one lock; MALLOC_ARENA_MAX in the environment wins.
void cap_malloc_arenas() {
  if (std::getenv("MALLOC_ARENA_MAX")) return;
  mallopt(M_ARENA_MAX, 2);
}

} // namespace

int run_worker(const process_manager::WorkerContext& context, const WorkerSettings& settings,
               const HandlerFactory& make_handler) {
  // A worker forked by its generation's mold is set up already (runners/mold_boot.hpp).
  if (!context.from_mold) {
    OutputCapture::attach(settings.output_fd);
    if (std::string why = prepare_sandbox(settings.sandbox); !why.empty())
      return process_manager::boot_failure(context, "sandbox: " + why);
    if (!drop_privileges(settings.credentials))
      return process_manager::boot_failure(context, std::string("could not drop privileges: ") +
                                                        std::strerror(errno));
    apply_environment(settings.clear_env, settings.env);
  }
  return_large_allocations_when_freed();
  if (settings.threads > 1) cap_malloc_arenas();
  HandlerPtr handler(nullptr, [](app::Handler*) {});
  try {
    handler = make_handler();
    handler->on_worker_start();
  } catch (const std::exception& e) {
    return process_manager::boot_failure(context, e.what()); // the master logs it, once
  }
  // The sandbox closes around the handler as on_worker_start left it, before the ready check
  // (which so proves that the handler answers inside it) and the first request.
  if (SandboxResult sandbox = enter_sandbox(settings.sandbox); !sandbox.error.empty())
    return process_manager::boot_failure(context, "sandbox: " + sandbox.error);
  else if (!sandbox.skipped.empty() && context.slot_index == 0)
    PM_LOG(LogLevel::Warn, "sandbox best-effort, not applied: " + sandbox.skipped);
  if (std::string why = ready_check(*handler, settings.ready_path); !why.empty())
    return process_manager::boot_failure(context, why);
  int code;
  {
    WorkerLoop loop(context, settings, *handler, &make_handler, settings.handler_thread_safe);
    code = loop.run();
  }
  try {
    handler->on_worker_stop();
  } catch (const std::exception& e) {
    PM_LOG(LogLevel::Error, std::string("on_worker_stop failed: ") + e.what());
  }
  return code;
}

} // namespace fcgi_host
