#pragma once
// app::Handler: what a user writes. One required method; the worker hooks are optional.
#include "app/request.hpp"
#include "app/response.hpp"

namespace app {

class Handler {
public:
  virtual ~Handler() = default;
  // Called for every request. An exception becomes a 500 for that request only (logged once);
  // the worker goes on serving.
  virtual void handle(const Request& request, Response& response) = 0;
  // Called once in each worker process before its first request (open connections, warm caches)
  // and once when it stops. An exception from on_worker_start is a boot failure.
  // With --sandbox on, on_worker_start runs OUTSIDE the sandbox (it closes right after), with
  // the worker's user and --private-tmp's /tmp: open here what the sandbox's lists do not name.
  // on_worker_stop runs inside it.
  virtual void on_worker_start() {}
  virtual void on_worker_stop() {}
  // With --threads T > 1: called in each handler thread before its first request and when it
  // stops, on the handler instance that thread uses (a database connection per thread).
  // Both run INSIDE the sandbox (the threads start after it closed, as handle() runs): a file
  // they open must be under --sandbox-write (or --sandbox-read); the boot-failure line says so.
  virtual void on_thread_start() {}
  virtual void on_thread_stop() {}
  // Called when the worker (each handler thread, on its instance, with --threads) has had no
  // request for --idle-work-after milliseconds, at most once per idle period: work nobody waits
  // for (a cache refreshed, memory given back). The worker or thread takes no new request until
  // it returns (kept connections go to other workers as from a busy one), so keep it short. An
  // exception is logged; the worker goes on. Time spent here is on the status page.
  virtual void on_idle() {}
  // Asked when a request's params are in and its body is still on its way: true to run the
  // handler now and let it read the body as it arrives (Request::body_reader(), bounded memory
  // whatever the body's size). By default the body arrives whole first (Request::body()).
  virtual bool streams_body(const Request& request) const {
    (void)request;
    return false;
  }
};

} // namespace app
