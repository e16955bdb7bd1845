#include "fcgi_host/cli/settings_from_config.hpp"

#include "fcgi_host/runners/exec_worker.hpp"
#include "fcgi_host/sandbox/sandbox.hpp"

#include "process_manager/clock.hpp"

#include <string>

namespace fcgi_host {

namespace {

// The status socket's own backlog: a monitoring poll at a time, never a burst of clients.
constexpr int kStatusBacklog = 64;

process_manager::PoolMode pool_mode(const std::string& pm) {
  if (pm == "dynamic") return process_manager::PoolMode::Dynamic;
  if (pm == "ondemand") return process_manager::PoolMode::OnDemand;
  return process_manager::PoolMode::Static;
}

} // namespace

ListenOptions listen_options(const Config& config) {
  ListenOptions o;
  o.address = config.listen;
  o.backlog = config.backlog;
  o.mode = config.socket_mode;
  o.owner = config.socket_owner;
  o.group = config.socket_group;
  return o;
}

namespace {

// A socket of the master's own at `address`: owned by the user running fcgi-host, 0600, or 0660
// for --socket-group (the web server's group reads the workers' socket; an operator's group may
// read status). Never --socket-owner's nor --socket-mode's: the web server needs the workers'
// socket, not the master's pages.
ListenOptions master_socket_options(const Config& config, const std::string& address) {
  ListenOptions o = listen_options(config);
  std::string why;
  parse_listen_address(address, o.address, why); // checked by parse_config
  o.backlog = kStatusBacklog;
  o.owner.clear();
  o.mode = config.socket_group.empty() ? 0600 : 0660;
  return o;
}

} // namespace

// The status socket is the master's, closed by default.
ListenOptions status_listen_options(const Config& config) {
  return master_socket_options(config, config.status_listen);
}

// The health port: the status socket's rules (the master's, not the web server's).
ListenOptions health_listen_options(const Config& config) {
  return master_socket_options(config, config.health_listen);
}

HealthSettings health_settings(const Config& config) {
  HealthSettings s;
  s.allow = ClientFilter(config.health_allow);
  s.ready_max_queue_ns = process_manager::ns(config.ready_max_queue_time);
  return s;
}

Credentials credentials(const Config& config) {
  return resolve_credentials(config.user, config.group);
}

ObservabilitySettings observability_settings(const Config& config) {
  ObservabilitySettings s;
  s.metrics = config.metrics;
  s.slow_threshold_ns = process_manager::ns(config.slow_request_threshold);
  s.status_path = config.status_path;
  s.ping_path = config.ping_path;
  s.ping_response = config.ping_response;
  s.status_allow = ClientFilter(config.status_allow);
  s.pool_mode = config.pm;
  if (!config.pool.empty()) s.pool_name = config.pool;
  s.sandbox = sandbox_line(config);
  return s;
}

AdmissionSettings admission_settings(const Config& config) {
  return AdmissionSettings{process_manager::ns(config.max_queue_time)};
}

CaptureSettings capture_settings(const Config& config) {
  CaptureSettings s;
  s.dir = config.capture_dir;
  if (!config.pool.empty()) s.file_prefix += "-" + config.pool;
  s.max_bytes = config.capture_max_bytes;
  s.max_files = config.capture_max_files;
  s.redact = config.capture_redact;
  s.keep_body = config.capture_body;
  return s;
}

SandboxSettings sandbox_settings(const Config& config) {
  SandboxSettings s;
  s.mode = config.sandbox == "on"            ? SandboxMode::On
           : config.sandbox == "best-effort" ? SandboxMode::BestEffort
           : config.sandbox == "log"         ? SandboxMode::Log
                                             : SandboxMode::Off;
  s.read = config.sandbox_read;
  if (!config.script_root.empty()) s.read.push_back(config.script_root);
  s.write = config.sandbox_write;
  s.allow_exec = config.sandbox_exec;
  s.connect_ports = config.sandbox_connect_ports;
  s.bind_ports = config.sandbox_bind_ports;
  s.private_tmp = config.private_tmp;
  // What the worker writes itself: its logs (reopened on USR1) and its crash captures.
  for (const std::string* own : {&config.error_log, &config.access_log, &config.capture_dir})
    if (!own->empty()) s.host_write.push_back(*own);
  return s;
}

std::string sandbox_line(const Config& config) {
  std::string line = describe_sandbox(sandbox_settings(config));
  if (config.script_root.empty() && config.script_extensions.empty()) return line;
  line += "; scripts";
  if (!config.script_root.empty()) line += " under " + config.script_root;
  for (std::size_t i = 0; i < config.script_extensions.size(); ++i)
    line +=
        (i == 0 ? (config.script_root.empty() ? " " : ", ") : " ") + config.script_extensions[i];
  return line + " (404 by the host)";
}

process_manager::PoolSettings pool_settings(const Config& config, bool handoff_channel) {
  process_manager::PoolSettings pool;
  pool.workers = config.workers;
  pool.graceful_timeout = config.graceful_timeout;
  pool.request_timeout = config.request_timeout;
  pool.slow_stack_after = config.slow_request_threshold;
  pool.reload_grace = config.reload_grace;
  pool.rollout = config.rollout;
  pool.mode = pool_mode(config.pm);
  pool.min_spare = config.min_spare;
  pool.max_spare = config.max_spare;
  pool.max_workers = config.max_workers;
  pool.idle_timeout = config.idle_timeout;
  if (!config.exec.empty()) {
    pool.retire_signal = SIGTERM; // libfcgi: finish the request, then exit; QUIT would kill
    pool.reopen_logs_signal = 0;  // libfcgi: USR1 means stop
    pool.resend_stop_every = std::chrono::milliseconds{500};
    pool.boot_window = kExecBootWindow;
  } else if (handoff_channel) {
    pool.nudge_after = config.handoff_after;
  }
  return pool;
}

WorkerSettings worker_settings(const Config& config, const WorkerPlumbing& plumbing) {
  WorkerSettings settings;
  settings.listen_fd = plumbing.listen_fd;
  settings.close_listen_fd_on_stop = true;
  settings.allow_clients = ClientFilter(config.allow_clients);
  settings.credentials = credentials(config);
  settings.clear_env = config.clear_env;
  settings.env = config.env;
  settings.limits = config.limits;
  settings.max_requests = config.max_requests;
  settings.threads = static_cast<unsigned>(config.threads);
  settings.event_heartbeat_ns =
      static_cast<std::uint64_t>(std::chrono::nanoseconds(config.event_heartbeat).count());
  settings.request_timeout_ns =
      static_cast<std::uint64_t>(std::chrono::nanoseconds(config.request_timeout).count());
  settings.idle_work_after_ns =
      static_cast<std::uint64_t>(std::chrono::nanoseconds(config.idle_work_after).count());
  settings.trim_when_idle = config.trim_when_idle;
  settings.max_requests_jitter = config.max_requests_jitter;
  settings.max_rss_kib = static_cast<long>(config.max_rss_mib) * 1024;
  settings.ready_path = config.ready_path;
  settings.observe = observability_settings(config);
  settings.admission = admission_settings(config);
  settings.max_response_head = config.max_response_head;
  settings.file_offload.mode =
      config.send_file_mode == "x-accel-redirect" ? app::FileOffload::Mode::XAccelRedirect
      : config.send_file_mode == "x-sendfile"     ? app::FileOffload::Mode::XSendfile
                                                  : app::FileOffload::Mode::Stream;
  settings.file_offload.prefix = config.x_accel_prefix;
  settings.capture = capture_settings(config);
  settings.sandbox = sandbox_settings(config);
  settings.output_fd = plumbing.output_fd;
  settings.handoff = plumbing.handoff;
  // FCGI_MAX_REQS: the requests the pool serves at once.
  settings.server_values.max_reqs = static_cast<unsigned>(config.workers * config.threads);
  settings.server_values.max_conns =
      static_cast<unsigned>(config.workers * config.limits.max_connections);
  return settings;
}

} // namespace fcgi_host
