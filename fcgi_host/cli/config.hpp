#pragma once
// Options and the config file. Every option works as `--name value` on the command line and as
// `name = value` in the INI file given by --config; the command line wins. Errors name the option
// (and file:line for the file) and the reason.
#include "fcgi_host/cli/option_table.hpp"
#include "fcgi_host/net/listen_address.hpp"

#include <chrono>
#include <cstddef>
#include <iosfwd>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <sys/types.h>
#include <vector>

namespace fcgi_host {

// Bounds on what one client may send or make a worker wait for. Defaults: the option table.
struct Limits {
  std::size_t max_body = default_size("max-body");               // bytes of FCGI_STDIN; more: 413
  std::size_t max_params_size = default_size("max-params-size"); // FCGI_PARAMS bytes; more: 400
  std::size_t max_params = default_size("max-params");           // name-value pairs; more: 400
  std::size_t max_records = default_size("max-records"); // records in one request; more: closed
  std::chrono::milliseconds header_timeout = default_duration("header-timeout"); // to last PARAMS
  std::chrono::milliseconds body_timeout = default_duration("body-timeout"); // between body reads
  std::chrono::milliseconds keepalive_timeout = default_duration("keepalive-timeout"); // idle kept
  std::chrono::milliseconds write_timeout = default_duration("write-timeout"); // stopped reading
  std::size_t max_connections = default_size("max-connections"); // connections of one worker
  // The body's total deadline: --body-timeout, plus one second for every body_min_rate bytes
  // received (a slow but steady upload goes on; a trickle does not).
  std::size_t body_min_rate = default_size("body-min-rate");
  // Bytes of unfinished requests and unsent responses one worker buffers; past it the
  // connections that made the least progress are closed.
  std::size_t max_buffered = default_size("max-buffered");
  // A request body larger than this goes to an unlinked temporary file instead of memory.
  std::size_t spill_threshold = default_size("spill-threshold");
  // A kept connection moves to a free worker when its own worker's handler has run this long.
  std::chrono::milliseconds handoff_after = default_duration("handoff-after");
};

// The parsed options. Defaults (for a Config built without parse_config) come from kOptions too,
// where the table has one; parse_config fills every field.
struct Config {
  std::string config_file;
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
  std::string app{find_option("app")->default_text};
  bool app_given = false; // --app was set (a program serving its own handler refuses it)
  Limits limits;
  std::chrono::milliseconds graceful_timeout = default_duration("graceful-timeout");
  std::chrono::milliseconds request_timeout = default_duration("request-timeout");

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
  bool clear_env = false;
  // Set on the master at start, so its workers inherit them; unset: inherited as they are.
  static constexpr unsigned long long kUnlimited = ~0ull;
  std::optional<unsigned long long> rlimit_files;
  std::optional<unsigned long long> rlimit_core; // bytes, or kUnlimited
  std::optional<int> nice;

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
  std::string access_log;
  std::string access_format;
  std::chrono::milliseconds slow_request_threshold{0};
  std::chrono::milliseconds max_queue_time{0}; // 0: off
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

// The number of CPUs, the default for --workers.
int default_worker_count();

} // namespace fcgi_host
