#pragma once
// The one translator from the options (Config, the whole command line and config file) to what
// each room below takes: every option reaches its room here. The rooms never see Config.
//
//   net/        ListenOptions            listen_options, status_listen_options,
//                                        health_listen_options
//   worker/     Credentials              credentials
//               WorkerSettings           worker_settings (with Limits, ObservabilitySettings,
//                                        AdmissionSettings, the client allow-list)
//               CaptureSettings          capture_settings (--capture-crashes)
//               SandboxSettings          sandbox_settings (--sandbox, --private-tmp)
//   observe/    ObservabilitySettings    observability_settings (also the master's status server)
//               AdmissionSettings        admission_settings (--max-queue-time)
//               HealthSettings           health_settings (the master's health port)
//   process_manager/  PoolSettings       pool_settings
#include "fcgi_host/cli/config.hpp"
#include "fcgi_host/net/listen_options.hpp"
#include "fcgi_host/observe/health_server.hpp"
#include "fcgi_host/observe/metrics.hpp"
#include "fcgi_host/observe/queue_time.hpp"
#include "fcgi_host/sandbox/sandbox_settings.hpp"
#include "fcgi_host/worker/handoff_channel.hpp"
#include "fcgi_host/worker/process_setup.hpp"
#include "fcgi_host/worker/worker.hpp"
#include "process_manager/master.hpp"

namespace fcgi_host {

// --listen, --backlog, --socket-mode/owner/group.
ListenOptions listen_options(const Config& config);
// --status-listen, with the socket file rules of --listen and a small backlog of its own.
ListenOptions status_listen_options(const Config& config);
// --health-listen, by the same rules.
ListenOptions health_listen_options(const Config& config);
// --health-allow, --ready-max-queue-time.
HealthSettings health_settings(const Config& config);

// --user, --group. Throws StartupError (unknown name, not root).
Credentials credentials(const Config& config);

ObservabilitySettings observability_settings(const Config& config);
AdmissionSettings admission_settings(const Config& config);
CaptureSettings capture_settings(const Config& config);
// --sandbox and its lists, --private-tmp, --script-root (the namespace is opened by the caller).
SandboxSettings sandbox_settings(const Config& config);
// The one line of the status page and --test-config: describe_sandbox, and the --exec script
// check when there is one ("; scripts under /srv/www, .php (404 by the host)").
std::string sandbox_line(const Config& config);

// With `handoff_channel` (built-in workers, a channel made), --handoff-after nudges slow workers.
// --exec programs are libfcgi's: their own stop and log signals, ready by time.
process_manager::PoolSettings pool_settings(const Config& config, bool handoff_channel);

// What a worker gets besides the options: descriptors the start-up opened.
struct WorkerPlumbing {
  int listen_fd = -1;
  int output_fd = -1;     // the workers' stdout and stderr (OutputCapture), -1: inherited
  HandoffChannel handoff; // kept connections move between workers through it
};

// Throws StartupError as credentials() does.
WorkerSettings worker_settings(const Config& config, const WorkerPlumbing& plumbing);

} // namespace fcgi_host
