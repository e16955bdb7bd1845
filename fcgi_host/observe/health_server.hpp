#pragma once
// --health-listen: the master answers plain HTTP about itself on a socket of its own, from its own
// loop (never a worker, never a route to one), so probes and scrapes answer while every worker is
// busy and requests queue (DESIGN.md decision 22):
//   /livez    200 while the master's loop runs
//   /readyz   200 once a generation of the pool was ready, until a graceful stop begins; 503
//             while starting, from the first moment of TERM/QUIT, and (--ready-max-queue-time)
//             while the newest running request waited longer than that
//   /metrics  the status page's metrics with a pool="NAME" label: the Prometheus text format, or
//             OpenMetrics when the Accept header asks for it
// One request per connection (answered with Connection: close), the head parsed strictly and
// capped (health_request.hpp), within the status socket's budgets (serve_queued.hpp).
#include "fcgi_host/net/listen_socket.hpp"
#include "fcgi_host/observe/client_error_log.hpp"
#include "fcgi_host/observe/health_request.hpp"
#include "fcgi_host/observe/metrics.hpp"

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

namespace fcgi_host {

struct HealthSettings {
  ClientFilter allow;                   // --health-allow
  std::uint64_t ready_max_queue_ns = 0; // --ready-max-queue-time; 0: off
};

// Whether /readyz answers 200, and why not (pure: tests/unit/test_health.cpp).
struct Readiness {
  bool ready = false;
  std::string why; // the 503's body
};
// `newest_queue_ns`: the queue time of the request that began last among those running (-1: none
// running, or not stamped by the web server).
Readiness readiness(bool stopping, bool generation_ready, std::int64_t newest_queue_ns,
                    std::uint64_t max_queue_ns);

// The newest running request's queue time in the pool's scoreboard (-1: none).
std::int64_t newest_queue_ns(const process_manager::Scoreboard& scoreboard);

struct HealthReply {
  int status = 200;
  std::string content_type = "text/plain; charset=utf-8";
  std::string body;
};

class HealthServer {
public:
  static constexpr std::chrono::milliseconds kBudget{250};
  static constexpr std::chrono::milliseconds kPerConnection{100};

  // On a socket bound by the caller (a new one, or one handed over by a binary upgrade).
  HealthServer(std::unique_ptr<ListenSocket> socket, HealthSettings settings,
               ObservabilitySettings observability, int pool_listen_fd);

  int fd() const { return socket_->fd(); }
  const std::string& description() const { return socket_->description(); }
  void set_scoreboard(const process_manager::Scoreboard* s) { scoreboard_ = s; }
  // The pool's socket is closed in the master (a stop began): no listen queue to report.
  void forget_pool_socket() { pool_listen_fd_ = -1; }
  // The host's graceful stop began: /readyz answers 503 from now on.
  void set_stopping() { stopping_ = true; }
  const SocketFile& file() const { return socket_->file(); }
  void forget_path() { socket_->forget_path(); }

  // The socket is readable: answer the queued connections.
  void serve();

  // The answer to a parsed request (public for the unit tests).
  HealthReply answer(const HealthRequest& request, bool allowed) const;

private:
  void serve_connection(int fd, bool allowed, std::uint64_t deadline_ns);

  std::unique_ptr<ListenSocket> socket_;
  HealthSettings settings_;
  ObservabilitySettings observability_;
  int pool_listen_fd_;
  bool stopping_ = false;
  const process_manager::Scoreboard* scoreboard_ = nullptr;
  ClientErrorLog client_errors_; // slow, silent or malformed clients: rate-limited lines
};

// "HTTP/1.1 200 OK" and the headers of `reply`; the body only when `with_body` (not for HEAD).
std::string http_response(const HealthReply& reply, bool with_body);

} // namespace fcgi_host
