#pragma once
// Serves a handler from a thread of the calling process, on a private Unix socket, with the same
// worker loop the real host runs (record guard, libfcgi, request adapter, limits): a handler's own
// tests can then talk to it with the raw FastCGI test client (tests/fcgi_test_client.hpp), as
// they would to a running host, without a master, nginx or fork.
//
//   MyHandler handler;
//   fcgi_host::InProcessHost host(handler);
//   auto client = fcgi_test::Client::connect(host.address());
//   CHECK(client.request("GET", "/hello").body == "Hello");
//
// Several may run at once in one process (the host's I/O hooks under libfcgi find their request
// by fd). The worker sets SIGPIPE, SIGHUP, SIGTTIN, SIGTTOU and SIGUSR2 to ignored, as it does
// in a worker process.
#include "app/handler.hpp"
#include "fcgi_host/config/limits.hpp"
#include "fcgi_host/worker/handler_factory.hpp"

#include <atomic>
#include <memory>
#include <string>
#include <thread>

namespace process_manager {
class Scoreboard;
}

namespace fcgi_host {

class ListenSocket;
struct WorkerSettings; // fcgi_host/worker/worker.hpp (not installed): for fcgi-host replay

class InProcessHost {
public:
  // `metrics`: the per-route metrics and scoreboard of a worker process (off by default: a
  // handler's tests rarely want them).
  explicit InProcessHost(app::Handler& handler, Limits limits = {}, bool metrics = false);
  // Any worker's settings (listen_fd is the host's own; keep credentials and handoff unset: the
  // worker runs in this process), and a handler made by `make_handler` in the worker's thread
  // (on_worker_start runs there too): `fcgi-host replay` runs a captured request so.
  InProcessHost(const WorkerSettings& settings, HandlerFactory make_handler);
  // Stops the worker gracefully (it finishes what it holds) and removes the socket.
  ~InProcessHost();
  InProcessHost(const InProcessHost&) = delete;
  InProcessHost& operator=(const InProcessHost&) = delete;

  // "unix:/tmp/fcgi-host-test-XXXXXX/host.sock"
  const std::string& address() const { return address_; }
  // The worker has returned (it could not boot: on_worker_start threw, or its setup failed;
  // the reason went to the log), with its exit code (process_manager/exit_codes.hpp).
  bool worker_ended() const { return ended_.load(std::memory_order_acquire); }
  int worker_exit_code() const { return exit_code_; }

private:
  void start(const WorkerSettings& settings, HandlerFactory make_handler);

  std::string dir_;
  std::string address_;
  std::unique_ptr<ListenSocket> socket_;
  std::unique_ptr<process_manager::Scoreboard> scoreboard_;
  std::atomic<bool> ended_{false};
  int exit_code_ = 0; // written before ended_
  std::thread thread_;
};

} // namespace fcgi_host
