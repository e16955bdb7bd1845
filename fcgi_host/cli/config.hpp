#pragma once
// Options and the config file. Every option works as `--name value` on the command line and as
// `name = value` in the INI file given by --config; the command line wins. Errors name the option
// (and file:line for the file) and the reason.
#include "fcgi_host/config/limits.hpp"
#include "fcgi_host/config/option_table.hpp"
#include "fcgi_host/net/listen_address.hpp"
#include "process_manager/pool_settings.hpp"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <iosfwd>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <sys/types.h>
#include <vector>

namespace fcgi_host {

// The parsed options. Defaults (for a Config built without parse_config) come from kOptions too,
// where the table has one; parse_config fills every field.
struct Config {
  std::string config_file;
  // The files this configuration was read from: config_file and, for a pool, the file of its
  // section (what --watch watches besides the plugin).
  std::vector<std::string> config_files;
  bool test_config = false;
  // Where each option given came from: "--name" or "FILE:LINE: name" (see where()).
  std::map<std::string, std::string, std::less<>> origins;
  std::string where(std::string_view name) const {
    auto it = origins.find(name);
    return it != origins.end() ? it->second : "--" + std::string(name);
  }

  ListenAddress listen; // Kind::Inherited when --listen is not given
  int backlog = static_cast<int>(default_size("backlog"));
  mode_t socket_mode = default_octal("socket-mode");
  std::string socket_owner;
  std::string socket_group;

  int workers = 1;
  std::string workers_from; // without --workers: why this many ("CPU quota 1.5"), for the log
  int threads = 1;          // handler threads per worker (--threads)
  std::chrono::milliseconds event_heartbeat = default_duration("event-heartbeat");
  std::chrono::milliseconds idle_work_after{default_size("idle-work-after")}; // 0: off
  bool trim_when_idle = false; // --trim-when-idle on: malloc_trim at the idle work
  std::string app{find_option("app")->default_text};
  bool app_given = false; // --app was set (a program serving its own handler refuses it)
  Limits limits;
  // A kept connection moves to a free worker when its own worker's handler has run this long
  // (pool policy: the master nudges the worker, see process_manager/).
  std::chrono::milliseconds handoff_after = default_duration("handoff-after");
  std::chrono::milliseconds graceful_timeout = default_duration("graceful-timeout");
  std::chrono::milliseconds request_timeout = default_duration("request-timeout");
  std::string ready_path; // the health gate: a worker serves once its handler answered it 2xx
  std::chrono::milliseconds reload_grace = default_duration("reload-grace");
  bool watch = false; // --watch on: reload when the plugin or a config file changes
  process_manager::RolloutSettings rollout; // --rollout and its judgement's options
  bool mold = false; // --mold on: a mold per generation loads once and forks the workers

  std::string error_log; // empty: stderr
  std::string log_level{find_option("log-level")->default_text};

  // Access control.
  std::vector<std::string> allow_clients; // CIDRs or addresses; empty: everyone who can connect
  std::string user;                       // workers drop to this user after binding
  std::string group;
  std::vector<std::string> status_allow; // who may read the status and ping paths

  // Lifecycle.
  unsigned long max_requests = 0;        // recycle a worker after this many requests (0: never)
  unsigned long max_requests_jitter = 0; // each worker adds a random 0..J to max_requests
  std::size_t max_rss_mib = 0;           // recycle a worker whose RSS passes this (0: never)
  std::string pm{find_option("pm")->default_text}; // static, dynamic, ondemand
  int min_spare = static_cast<int>(default_size("min-spare"));
  int max_spare = static_cast<int>(default_size("max-spare"));
  int max_workers = 0; // dynamic/ondemand ceiling; 0: --workers
  std::chrono::milliseconds idle_timeout = default_duration("idle-timeout");
  std::vector<std::string> exec; // spawn mode: program and arguments
  std::string pidfile;
  std::string chdir;
  std::vector<std::string> env; // NAME=VALUE
  bool clear_env = find_option("clear-env")->default_text == "on";
  // Set on the master at start, so its workers inherit them; unset: inherited as they are.
  static constexpr unsigned long long kUnlimited = ~0ull;
  std::optional<unsigned long long> rlimit_files;
  std::optional<unsigned long long> rlimit_core; // bytes, or kUnlimited
  std::optional<int> nice;
  // The sandbox of the workers (fcgi_host/sandbox/sandbox.hpp).
  std::string sandbox{find_option("sandbox")->default_text}; // off, on, best-effort, log
  std::vector<std::string> sandbox_read;
  std::vector<std::string> sandbox_write;
  std::vector<std::string> sandbox_connect; // HOST:PORT, as given
  std::vector<std::uint16_t> sandbox_connect_ports;
  std::vector<std::uint16_t> sandbox_bind_ports;
  bool sandbox_exec = false;
  bool private_tmp = false;
  std::string script_root; // --exec: the only tree the program may read scripts from
  std::vector<std::string> script_extensions; // --exec: the suffixes a script may have
  // Pools: a cgroup v2 of the pool's own, made by the master of the pools (pools/cgroups.hpp).
  std::optional<unsigned long long> memory_max; // bytes, or kUnlimited ("max")
  std::optional<int> cpu_weight;
  bool wants_cgroup() const { return memory_max || cpu_weight; }

  // Pools (config_file.hpp): a config file with [sections] describes several applications.
  std::string pool;               // --pool: the section this process runs; empty: not a pool
  std::vector<std::string> pools; // the file's pools, when this process runs them all
  int max_workers_total = 0;      // the cap over every pool's ceiling; 0: none
  std::string settings_text;      // every option given, one "name = value" line each

  // Responses: the head's limit, and how Response::send_file() answers.
  std::size_t max_response_head = default_size("max-response-head");
  std::string send_file_mode{find_option("send-file-mode")->default_text};
  std::string x_accel_prefix{find_option("x-accel-prefix")->default_text};

  // Observability.
  std::string status_path;
  std::string ping_path;
  std::string ping_response{find_option("ping-response")->default_text};
  std::string status_listen;
  std::string health_listen;                         // empty: no health port
  std::vector<std::string> health_allow;             // who may read it
  std::chrono::milliseconds ready_max_queue_time{0}; // 0: off
  std::string access_log;
  std::string access_format;
  std::chrono::milliseconds slow_request_threshold{0};
  std::chrono::milliseconds max_queue_time{0}; // 0: off
  // --capture-crashes: the request in flight at a crash, kept for `fcgi-host replay`.
  std::string capture_dir; // empty: off
  std::size_t capture_max_bytes = default_size("capture-max-bytes");
  unsigned capture_max_files = static_cast<unsigned>(default_size("capture-max-files"));
  std::vector<std::string> capture_redact; // beside the built-in patterns
  bool capture_body = true;
  bool metrics = true;
};

class ConfigError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

enum class ParseOutcome { Run, Exit };

// Parses argv (and the --config file it names) into `config`. Prints --help or --version to `out`
// and returns Exit for them. Throws ConfigError with a message naming the option.
// On the command line, every word after `--exec PROGRAM` is the program's (a `--` right after
// PROGRAM is dropped): host options go before --exec.
ParseOutcome parse_config(int argc, const char* const* argv, Config& config, std::ostream& out);

// Prints --help: the usage lines, every option of kOptions, the signal table and exit codes.
void print_help(std::ostream& out);

// The default for --workers: the CPUs this process may use (the CPU quota of its cgroup, else its
// affinity mask, else the cores; process_manager/cpu_quota.hpp).
int default_worker_count();

} // namespace fcgi_host
