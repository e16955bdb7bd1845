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
#include "fcgi_host/observe/status_client.hpp"

namespace fcgi_host {

inline constexpr int kClientHealthy = 0;
inline constexpr int kClientUnhealthy = 1;
inline constexpr int kClientUsage = 2;
inline constexpr int kClientNoAnswer = 3;

bool is_client_command(int argc, char** argv);
int run_client_command(int argc, char** argv);

} // namespace fcgi_host
