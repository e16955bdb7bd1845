#pragma once
// `fcgi-host status|ping --connect ADDR`: ask a running host over FastCGI, as a health check for
// systemd, Docker or Kubernetes.
//
//   fcgi-host ping   --connect ADDR [--path /ping] [--timeout SECONDS]
//   fcgi-host status --connect ADDR [--path /status] [--json|--openmetrics|--prometheus|--html]
//                    [--full] [--max-queue N] [--timeout SECONDS]
//   fcgi-host status|ping --help
//
// Prints the page on stdout. Exit codes: 0 healthy; 1 unhealthy (an answer other than 200, or,
// with --max-queue, no idle worker while more than N connections wait); 2 bad usage; 3 no answer
// (cannot connect, nothing within the timeout, 5 s by default, or an answer without the
// X-Fcgi-Host header every status and ping answer of the host carries).
#include <chrono>
#include <string>

namespace fcgi_host {

inline constexpr int kClientHealthy = 0;
inline constexpr int kClientUnhealthy = 1;
inline constexpr int kClientUsage = 2;
inline constexpr int kClientNoAnswer = 3;

// One request to a host's status socket (or its --listen address), as these commands make it.
struct HostQuery {
  std::string method = "GET";
  std::string path = "/status";
  std::string query;  // without '?'
  std::string accept; // HTTP_ACCEPT, when not empty
};
struct HostReply {
  bool from_host = false; // the X-Fcgi-Host header was there
  int status = 200;
  std::string content_type;
  std::string idle, queue; // X-Idle-Workers, X-Listen-Queue
  std::string body;
};
// Connects, asks and reads the answer within `timeout`. Throws std::runtime_error saying why
// (cannot connect, no answer in time, an answer that is not fcgi-host's).
HostReply ask_host(const std::string& address, const HostQuery& query,
                   std::chrono::milliseconds timeout);

bool is_client_command(int argc, char** argv);
int run_client_command(int argc, char** argv);

} // namespace fcgi_host
