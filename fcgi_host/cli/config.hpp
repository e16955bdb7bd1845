#pragma once
// Options and the config file. Every option works as `--name value` on the command line and as
// `name = value` in the INI file given by --config; the command line wins. Errors name the option
// (and file:line for the file) and the reason.
#include "fcgi_host/net/listen_address.hpp"

#include <chrono>
#include <cstddef>
#include <iosfwd>
#include <stdexcept>
#include <string>
#include <sys/types.h>
#include <vector>

namespace fcgi_host {

// Bounds on what one client may send or make a worker wait for (see conf/fcgi-host.conf).
struct Limits {
  std::size_t max_body = 8u << 20;         // bytes of FCGI_STDIN; more: 413
  std::size_t max_params_size = 64u << 10; // bytes of FCGI_PARAMS (names and values); more: 400
  std::size_t max_params = 1000;           // name-value pairs; more: 400
  std::size_t max_records = 100'000;       // records in one request; more: connection closed
  std::chrono::milliseconds header_timeout{10'000};    // connect to the last PARAMS record
  std::chrono::milliseconds body_timeout{30'000};      // between two reads of the body
  std::chrono::milliseconds keepalive_timeout{75'000}; // a kept connection idle between requests
  std::chrono::milliseconds write_timeout{30'000};     // a client that stopped reading
  std::size_t max_connections = 256;                   // connections one worker holds at once
  // The body's total deadline: --body-timeout, plus one second for every body_min_rate bytes
  // received (a slow but steady upload goes on; a trickle does not).
  std::size_t body_min_rate = 16u << 10;
  // Bytes of unfinished requests and unsent responses one worker buffers; past it the
  // connections that made the least progress are closed.
  std::size_t max_buffered = 64u << 20;
  // A request body larger than this goes to an unlinked temporary file instead of memory.
  std::size_t spill_threshold = 1u << 20;
  // A kept connection moves to a free worker when its own worker's handler has run this long.
  std::chrono::milliseconds handoff_after{2};
};

struct Config {
  std::string config_file;
  bool test_config = false;

  ListenAddress listen; // Kind::Inherited when --listen is not given
  int backlog = 1024;
  mode_t socket_mode = 0660;
  std::string socket_owner;
  std::string socket_group;

  int workers = 1;
  std::string app = "hello";
  Limits limits;
  std::chrono::milliseconds graceful_timeout{30'000};
  std::chrono::milliseconds request_timeout{0};

  std::string error_log; // empty: stderr
  std::string log_level = "notice";

  // Access control.
  std::vector<std::string> allow_clients; // CIDRs or addresses; empty: everyone who can connect
  std::string user;                       // workers drop to this user after binding
  std::string group;
  std::vector<std::string> status_allow; // who may read the status and ping paths

  // Lifecycle.
  unsigned long max_requests = 0;        // recycle a worker after this many requests (0: never)
  unsigned long max_requests_jitter = 0; // each worker adds a random 0..J to max_requests
  std::size_t max_rss_mib = 0;           // recycle a worker whose RSS passes this (0: never)
  std::string pm = "static";             // static, dynamic, ondemand
  int min_spare = 1;
  int max_spare = 3;
  int max_workers = 0; // dynamic/ondemand ceiling; 0: --workers
  std::chrono::milliseconds idle_timeout{10'000};
  std::vector<std::string> exec; // spawn mode: program and arguments
  std::string pidfile;
  std::string chdir;
  std::vector<std::string> env; // NAME=VALUE
  bool clear_env = false;

  // Observability.
  std::string status_path;
  std::string ping_path;
  std::string ping_response = "pong";
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
ParseOutcome parse_config(int argc, const char* const* argv, Config& config, std::ostream& out);

// The number of CPUs, the default for --workers.
int default_worker_count();

} // namespace fcgi_host
