#include "fcgi_host/cli/config.hpp"

#include "app/plugin.hpp"
#include "fcgi_host/cli/help_text.hpp"
#include "fcgi_host/cli/version.hpp"
#include "fcgi_host/net/client_filter.hpp"
#include "process_manager/log.hpp"

#include <boost/program_options.hpp>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <map>
#include <ostream>
#include <set>
#include <sstream>
#include <thread>

namespace po = boost::program_options;

namespace fcgi_host {
namespace {

// No abbreviations: `--work 2` must not silently mean --workers.
constexpr int kStyle = po::command_line_style::unix_style & ~po::command_line_style::allow_guessing;

// Where a value came from, for error messages: "--workers" or "host.conf:12: workers".
class Origins {
public:
  void from_file(const std::string& name, const std::string& file, int line) {
    where_[name] = file + ":" + std::to_string(line) + ": " + name;
  }
  std::string of(const std::string& name) const {
    auto it = where_.find(name);
    return it != where_.end() ? it->second : "--" + name;
  }

private:
  std::map<std::string, std::string> where_;
};

po::options_description describe(const Config& d) {
  const Limits& l = d.limits;
  auto secs = [](std::chrono::milliseconds ms) {
    std::ostringstream s;
    s << ms.count() / 1000.0;
    return s.str();
  };
  po::options_description all("Options (also valid as `name = value` in the --config file)");
  // Defaults are shown as text so that --help prints exactly what the file says.
  all.add_options()                                                                 //
      ("help,h", "print this help, the signal table and the exit codes, then exit") //
      ("version", "print the version and exit")                                     //
      ("config,c", po::value<std::string>()->value_name("FILE"),
       "read options from this INI file (the command line wins)") //
      ("test-config,t", po::bool_switch(), "check the options and the config file, then exit")

          ("listen,l", po::value<std::string>()->value_name("ADDR"),
           "unix:/path, /path, HOST:PORT, [IPv6]:PORT or :PORT. Default: the listening socket "
           "inherited on fd 0 (spawn-fcgi) or from systemd (LISTEN_FDS)") //
      ("backlog", po::value<int>()->value_name("N")->default_value(d.backlog),
       "listen queue length") //
      ("socket-mode", po::value<std::string>()->value_name("MODE")->default_value("0660"),
       "permissions of a Unix socket, in octal") //
      ("socket-owner", po::value<std::string>()->value_name("USER"),
       "owner of a Unix socket (default: the user running fcgi-host)") //
      ("socket-group", po::value<std::string>()->value_name("GROUP"),
       "group of a Unix socket (default: the primary group)")

          ("workers,w", po::value<int>()->value_name("N"),
           "worker processes (default: the number of CPUs)") //
      ("app,a", po::value<std::string>()->value_name("NAME|PATH.so")->default_value(d.app),
       "built-in app (hello, echo) or a plugin library exporting " FCGI_HOST_PLUGIN_SYMBOL)
      //
      ("graceful-timeout", po::value<double>()->value_name("SECONDS")->default_value(30, "30"),
       "how long in-flight requests may run on stop and reload before workers are killed") //
      ("request-timeout", po::value<double>()->value_name("SECONDS")->default_value(0, "0"),
       "kill and replace a worker whose request runs longer (0: never)")

          ("max-body", po::value<std::string>()->value_name("BYTES")->default_value("8M"),
           "largest request body (K, M, G suffixes); larger: 413") //
      ("max-params-size",
       po::value<std::string>()->value_name("BYTES")->default_value(
           std::to_string(l.max_params_size)),
       "largest total size of a request's FastCGI params; larger: 400") //
      ("max-params", po::value<std::size_t>()->value_name("N")->default_value(l.max_params),
       "most FastCGI params in a request; more: 400") //
      ("max-records", po::value<std::size_t>()->value_name("N")->default_value(l.max_records),
       "most FastCGI records in a request; more: the connection is closed") //
      ("max-connections",
       po::value<std::size_t>()->value_name("N")->default_value(l.max_connections),
       "most connections one worker holds (kept-alive ones included)") //
      ("header-timeout",
       po::value<double>()->value_name("SECONDS")->default_value(10, secs(l.header_timeout)),
       "time from connect to the end of the request's params") //
      ("body-timeout",
       po::value<double>()->value_name("SECONDS")->default_value(30, secs(l.body_timeout)),
       "longest pause while reading a request body; also its total time, plus one second per "
       "--body-min-rate bytes received") //
      ("body-min-rate",
       po::value<std::string>()->value_name("BYTES")->default_value(
           std::to_string(l.body_min_rate >> 10) + "K"),
       "bytes per second a body must average past --body-timeout (0: the body's total time is "
       "--body-timeout)") //
      ("max-buffered",
       po::value<std::string>()->value_name("BYTES")->default_value(
           std::to_string(l.max_buffered >> 20) + "M"),
       "bytes of unfinished requests and unsent responses one worker holds; past it, the "
       "connections that made the least progress are closed") //
      ("spill-threshold",
       po::value<std::string>()->value_name("BYTES")->default_value(
           std::to_string(l.spill_threshold >> 20) + "M"),
       "a request body larger than this is kept in an unlinked temporary file, not in memory "
       "(--max-body still caps it)") //
      ("handoff-after",
       po::value<double>()->value_name("SECONDS")->default_value(
           0.002, std::to_string(l.handoff_after.count()) + " ms"),
       "move a worker's kept connections to a free worker once its handler has run this long "
       "(0: never; a stopping worker still passes them on)") //
      ("keepalive-timeout",
       po::value<double>()->value_name("SECONDS")->default_value(75, secs(l.keepalive_timeout)),
       "close a kept connection idle this long (keep it above nginx's keepalive_timeout)") //
      ("write-timeout",
       po::value<double>()->value_name("SECONDS")->default_value(30, secs(l.write_timeout)),
       "longest wait for a client that stopped reading the response")

          ("error-log", po::value<std::string>()->value_name("FILE"),
           "write the log to this file (default: stderr)") //
      ("log-level", po::value<std::string>()->value_name("LEVEL")->default_value(d.log_level),
       "debug, info, notice, warn, error or alert") //
      ("access-log", po::value<std::string>()->value_name("FILE"),
       "write one line per request to this file (default: none)") //
      ("access-format", po::value<std::string>()->value_name("FORMAT"),
       "access log line: %a remote address, %m method, %u URI, %s status, %d duration ms, %c CPU "
       "ms, %b body bytes, %p pid, %w worker slot, %g generation, %t time, %q queue time ms "
       "(default: \"%a %m %u %s %d %b\")") //
      ("slow-request-threshold", po::value<double>()->value_name("SECONDS")->default_value(0, "0"),
       "log requests that take longer (0: off)") //
      ("max-queue-time", po::value<long>()->value_name("MS")->default_value(0, "0"),
       "answer 503 at once, without running the handler, to a request that waited longer for a "
       "worker (arrival stamped by the web server in HTTP_X_REQUEST_START), or whose client is "
       "gone (0: off)") //
      ("metrics", po::value<std::string>()->value_name("on|off")->default_value("on"),
       "keep per-handler metrics and the scoreboard's request details")

          ("status-path", po::value<std::string>()->value_name("PATH"),
           "answer this path with the status page (text; ?json, ?openmetrics, ?full)") //
      ("ping-path", po::value<std::string>()->value_name("PATH"),
       "answer this path with --ping-response") //
      ("ping-response",
       po::value<std::string>()->value_name("TEXT")->default_value(d.ping_response),
       "the body of a ping answer") //
      ("status-listen", po::value<std::string>()->value_name("ADDR"),
       "the master itself serves status and ping here, also when every worker is busy") //
      ("status-allow", po::value<std::string>()->value_name("LIST"),
       "addresses or CIDRs allowed to read status and ping, and `unix` for clients of a Unix "
       "socket server; what does not parse is refused (default: everyone)")

          ("allow-clients", po::value<std::string>()->value_name("LIST"),
           "only these addresses or CIDRs may connect, comma-separated, IPv4 and IPv6 (default: "
           "everyone who can reach the socket)") //
      ("user", po::value<std::string>()->value_name("USER"),
       "run workers as this user (the socket is bound first; started as root: nobody, unless "
       "this says otherwise, root included)") //
      ("group", po::value<std::string>()->value_name("GROUP"),
       "run workers with this group (default: the user's)")

          ("max-requests", po::value<unsigned long>()->value_name("N")->default_value(0),
           "recycle a worker after this many requests (0: never)") //
      ("max-requests-jitter", po::value<unsigned long>()->value_name("N")->default_value(0),
       "add a random 0..N to each worker's --max-requests, so they never restart in step") //
      ("max-rss", po::value<std::size_t>()->value_name("MIB")->default_value(0),
       "recycle a worker after the request that took its memory (RSS) past this (0: never)") //
      ("pm", po::value<std::string>()->value_name("MODE")->default_value(d.pm),
       "static (always --workers), dynamic (between spares), ondemand (spawn on demand)") //
      ("min-spare", po::value<int>()->value_name("N")->default_value(d.min_spare),
       "dynamic: fewest idle workers") //
      ("max-spare", po::value<int>()->value_name("N")->default_value(d.max_spare),
       "dynamic: most idle workers") //
      ("max-workers", po::value<int>()->value_name("N")->default_value(0),
       "dynamic, ondemand: most workers (0: --workers)") //
      ("idle-timeout", po::value<double>()->value_name("SECONDS")->default_value(10, "10"),
       "ondemand: stop a worker idle this long") //
      ("exec", po::value<std::string>()->value_name("PROGRAM"),
       "spawn mode: run PROGRAM (with the arguments after it) as each worker, the listening "
       "socket on its fd 0, as spawn-fcgi does, but supervised")                               //
      ("pidfile", po::value<std::string>()->value_name("FILE"), "write the master's pid here") //
      ("chdir", po::value<std::string>()->value_name("DIR"), "change to this directory")       //
      ("env", po::value<std::vector<std::string>>()->value_name("NAME=VALUE")->composing(),
       "set an environment variable for the workers (repeatable)") //
      ("clear-env", po::bool_switch(), "start workers with only the --env variables");
  return all;
}

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string word; in >> word;)
    out.push_back(word);
  return out;
}

std::size_t parse_size(const std::string& text, const std::string& where) {
  std::size_t pos = 0;
  unsigned long long value = 0;
  try {
    value = std::stoull(text, &pos);
  } catch (const std::exception&) {
    throw ConfigError(where + ": '" + text + "' is not a size (BYTES, or a number with K, M, G)");
  }
  std::string suffix = text.substr(pos);
  unsigned shift = 0;
  if (suffix == "k" || suffix == "K")
    shift = 10;
  else if (suffix == "m" || suffix == "M")
    shift = 20;
  else if (suffix == "g" || suffix == "G")
    shift = 30;
  else if (!suffix.empty())
    throw ConfigError(where + ": '" + text + "' has an unknown suffix (use K, M or G)");
  if (text[0] == '-' || value > (~0ull >> shift))
    throw ConfigError(where + ": '" + text + "' is out of range");
  return static_cast<std::size_t>(value << shift);
}

std::chrono::milliseconds parse_seconds(double value, const std::string& where, bool allow_zero) {
  if (!std::isfinite(value) || value < 0 || (!allow_zero && value == 0) || value > 86400.0 * 365)
    throw ConfigError(where + ": must be " + (allow_zero ? "0 or more" : "more than 0") +
                      " seconds (up to a year)");
  return std::chrono::milliseconds(static_cast<long long>(std::llround(value * 1000)));
}

// Reads `name = value` lines. Each line is parsed on its own, so that an error names its line.
void parse_config_file(const std::string& path, const po::options_description& options,
                       po::variables_map& vm, Origins& origins) {
  std::ifstream in(path);
  if (!in) throw ConfigError("cannot read config file \"" + path + "\": " + std::strerror(errno));
  std::string line;
  std::map<std::string, int> seen;
  for (int number = 1; std::getline(in, line); ++number) {
    std::string where = path + ":" + std::to_string(number);
    auto first = line.find_first_not_of(" \t\r");
    if (first == std::string::npos || line[first] == '#' || line[first] == ';') continue;
    auto eq = line.find('=');
    if (eq == std::string::npos)
      throw ConfigError(where + ": expected `name = value`, got \"" + line.substr(first) + "\"");
    auto trim = [](std::string s) {
      s.erase(0, s.find_first_not_of(" \t\r"));
      s.erase(s.find_last_not_of(" \t\r") + 1);
      return s;
    };
    std::string name = trim(line.substr(0, eq));
    std::string value = trim(line.substr(eq + 1));
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"')
      value = value.substr(1, value.size() - 2);
    if (name == "config" || name == "help" || name == "version" || name == "test-config")
      throw ConfigError(where + ": " + name + " cannot be set in a config file");
    if (auto [it, fresh] = seen.emplace(name, number); !fresh)
      throw ConfigError(where + ": " + name + " is given twice (first on line " +
                        std::to_string(it->second) + ")");
    if (vm.count(name) && !vm[name].defaulted()) continue; // the command line wins
    std::vector<std::string> arg{"--" + name + "=" + value};
    // A switch (--clear-env) is written `clear-env = true` in a file.
    if (const po::option_description* d = options.find_nothrow(name, false);
        d && d->semantic()->max_tokens() == 0) {
      if (value == "false" || value == "no" || value == "off" || value == "0") continue;
      if (value != "true" && value != "yes" && value != "on" && value != "1")
        throw ConfigError(where + ": " + name + " takes true or false, not '" + value + "'");
      arg = {"--" + name};
    }
    try {
      po::store(po::command_line_parser(arg).options(options).style(kStyle).run(), vm);
    } catch (const po::error& e) {
      throw ConfigError(where + ": " + e.what());
    }
    origins.from_file(name, path, number);
  }
}

} // namespace

int default_worker_count() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

ParseOutcome parse_config(int argc, const char* const* argv, Config& config, std::ostream& out) {
  const Config defaults;
  po::options_description options = describe(defaults);
  po::variables_map vm;
  Origins origins;
  // Words after --exec PROGRAM are the program's arguments (after `--` when they start with -).
  po::options_description hidden;
  hidden.add_options()("exec-args", po::value<std::vector<std::string>>());
  po::options_description cli;
  cli.add(options).add(hidden);
  po::positional_options_description positional;
  positional.add("exec-args", -1);
  try {
    po::store(
        po::command_line_parser(argc, argv).options(cli).positional(positional).style(kStyle).run(),
        vm);
  } catch (const po::error& e) {
    throw ConfigError(e.what());
  }
  if (vm.count("help")) {
    out << "Usage: fcgi-host [OPTIONS] [--exec PROGRAM [--] [ARGS...]]\n"
        << "       fcgi-host status|ping --connect ADDR [--json|--openmetrics]\n"
        << "A FastCGI application host: a master process preforks workers that accept on one\n"
        << "listening socket (nginx: fastcgi_pass) and run a C++ handler.\n\n"
        << options << "\n"
        << kSignalsHelp << "\n"
        << kExitCodesHelp;
    return ParseOutcome::Exit;
  }
  if (vm.count("version")) {
    out << "fcgi-host " << kVersion << "\n";
    return ParseOutcome::Exit;
  }
  if (vm.count("config")) {
    config.config_file = vm["config"].as<std::string>();
    parse_config_file(config.config_file, options, vm, origins);
  }
  try {
    po::notify(vm);
  } catch (const po::error& e) {
    throw ConfigError(e.what());
  }

  config.test_config = vm["test-config"].as<bool>();
  if (vm.count("listen")) {
    std::string why;
    if (!parse_listen_address(vm["listen"].as<std::string>(), config.listen, why))
      throw ConfigError(origins.of("listen") + ": '" + vm["listen"].as<std::string>() +
                        "' is not an address: " + why);
  }
  config.backlog = vm["backlog"].as<int>();
  if (config.backlog < 1 || config.backlog > 65535)
    throw ConfigError(origins.of("backlog") + ": must be from 1 to 65535");
  {
    const std::string& mode = vm["socket-mode"].as<std::string>();
    std::size_t pos = 0;
    unsigned long value = 0;
    try {
      value = std::stoul(mode, &pos, 8);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (pos != mode.size() || mode.empty() || value > 07777)
      throw ConfigError(origins.of("socket-mode") + ": '" + mode + "' is not an octal mode");
    config.socket_mode = static_cast<mode_t>(value);
  }
  if (vm.count("socket-owner")) config.socket_owner = vm["socket-owner"].as<std::string>();
  if (vm.count("socket-group")) config.socket_group = vm["socket-group"].as<std::string>();

  config.workers = vm.count("workers") ? vm["workers"].as<int>() : default_worker_count();
  if (config.workers < 1 || config.workers > 512)
    throw ConfigError(origins.of("workers") + ": must be from 1 to 512, got " +
                      std::to_string(config.workers));
  config.app = vm["app"].as<std::string>();
  if (config.app.empty()) throw ConfigError(origins.of("app") + ": must not be empty");

  config.graceful_timeout =
      parse_seconds(vm["graceful-timeout"].as<double>(), origins.of("graceful-timeout"), true);
  config.request_timeout =
      parse_seconds(vm["request-timeout"].as<double>(), origins.of("request-timeout"), true);

  Limits& l = config.limits;
  l.max_body = parse_size(vm["max-body"].as<std::string>(), origins.of("max-body"));
  l.max_params_size =
      parse_size(vm["max-params-size"].as<std::string>(), origins.of("max-params-size"));
  if (l.max_params_size < 1024)
    throw ConfigError(origins.of("max-params-size") + ": must be at least 1024 bytes");
  l.max_params = vm["max-params"].as<std::size_t>();
  if (l.max_params < 8) throw ConfigError(origins.of("max-params") + ": must be at least 8");
  l.max_records = vm["max-records"].as<std::size_t>();
  if (l.max_records < 4) throw ConfigError(origins.of("max-records") + ": must be at least 4");
  l.max_connections = vm["max-connections"].as<std::size_t>();
  if (l.max_connections < 1 || l.max_connections > 65536)
    throw ConfigError(origins.of("max-connections") + ": must be from 1 to 65536");
  l.header_timeout =
      parse_seconds(vm["header-timeout"].as<double>(), origins.of("header-timeout"), false);
  l.body_timeout =
      parse_seconds(vm["body-timeout"].as<double>(), origins.of("body-timeout"), false);
  l.keepalive_timeout =
      parse_seconds(vm["keepalive-timeout"].as<double>(), origins.of("keepalive-timeout"), false);
  l.write_timeout =
      parse_seconds(vm["write-timeout"].as<double>(), origins.of("write-timeout"), false);
  l.body_min_rate = parse_size(vm["body-min-rate"].as<std::string>(), origins.of("body-min-rate"));
  l.max_buffered = parse_size(vm["max-buffered"].as<std::string>(), origins.of("max-buffered"));
  if (l.max_buffered < l.max_body)
    throw ConfigError(origins.of("max-buffered") + ": must be at least --max-body (" +
                      std::to_string(l.max_body) + " bytes)");
  l.spill_threshold =
      parse_size(vm["spill-threshold"].as<std::string>(), origins.of("spill-threshold"));
  l.handoff_after =
      parse_seconds(vm["handoff-after"].as<double>(), origins.of("handoff-after"), true);

  auto text = [&vm](const char* name, std::string& out) {
    if (vm.count(name)) out = vm[name].as<std::string>();
  };
  text("error-log", config.error_log);
  config.log_level = vm["log-level"].as<std::string>();
  process_manager::LogLevel level;
  if (!process_manager::parse_log_level(config.log_level, level))
    throw ConfigError(origins.of("log-level") + ": '" + config.log_level +
                      "' is not one of debug, info, notice, warn, error, alert");

  text("access-log", config.access_log);
  text("access-format", config.access_format);
  config.slow_request_threshold = parse_seconds(vm["slow-request-threshold"].as<double>(),
                                                origins.of("slow-request-threshold"), true);
  long max_queue_ms = vm["max-queue-time"].as<long>();
  if (max_queue_ms < 0 || max_queue_ms > 3'600'000)
    throw ConfigError(origins.of("max-queue-time") + ": must be 0 (off) to 3600000 ms");
  config.max_queue_time = std::chrono::milliseconds(max_queue_ms);
  const std::string& metrics = vm["metrics"].as<std::string>();
  if (metrics != "on" && metrics != "off")
    throw ConfigError(origins.of("metrics") + ": must be on or off");
  config.metrics = metrics == "on";
  text("status-path", config.status_path);
  text("ping-path", config.ping_path);
  text("ping-response", config.ping_response);
  text("status-listen", config.status_listen);
  for (const char* path : {"status-path", "ping-path"})
    if (vm.count(path) && !vm[path].as<std::string>().starts_with("/"))
      throw ConfigError(origins.of(path) + ": must start with /");
  if (vm.count("status-listen")) {
    ListenAddress ignored;
    std::string why;
    if (!parse_listen_address(config.status_listen, ignored, why))
      throw ConfigError(origins.of("status-listen") + ": '" + config.status_listen +
                        "' is not an address: " + why);
  }
  for (auto [list, patterns] : {std::pair{"allow-clients", &config.allow_clients},
                                std::pair{"status-allow", &config.status_allow}}) {
    std::string why;
    if (vm.count(list) && !parse_client_list(vm[list].as<std::string>(), *patterns, why))
      throw ConfigError(origins.of(list) + ": " + why);
  }
  text("user", config.user);
  text("group", config.group);

  config.max_requests = vm["max-requests"].as<unsigned long>();
  config.max_requests_jitter = vm["max-requests-jitter"].as<unsigned long>();
  config.max_rss_mib = vm["max-rss"].as<std::size_t>();
  config.pm = vm["pm"].as<std::string>();
  if (config.pm != "static" && config.pm != "dynamic" && config.pm != "ondemand")
    throw ConfigError(origins.of("pm") + ": '" + config.pm +
                      "' is not one of static, dynamic, ondemand");
  config.min_spare = vm["min-spare"].as<int>();
  config.max_spare = vm["max-spare"].as<int>();
  config.max_workers = vm["max-workers"].as<int>();
  if (config.max_workers == 0) config.max_workers = config.workers;
  if (config.max_workers < 1 || config.max_workers > 512)
    throw ConfigError(origins.of("max-workers") + ": must be from 1 to 512");
  if (config.min_spare < 0 || config.max_spare < config.min_spare || config.max_spare < 1)
    throw ConfigError(origins.of("max-spare") + ": need 0 <= --min-spare <= --max-spare, and "
                                                "--max-spare >= 1");
  if (config.pm != "static" && config.max_workers < config.workers)
    throw ConfigError(origins.of("max-workers") + ": must not be below --workers");
  config.idle_timeout =
      parse_seconds(vm["idle-timeout"].as<double>(), origins.of("idle-timeout"), false);
  if (vm.count("exec")) {
    config.exec = split_words(vm["exec"].as<std::string>());
    if (vm.count("exec-args"))
      for (const auto& a : vm["exec-args"].as<std::vector<std::string>>())
        config.exec.push_back(a);
    if (config.exec.empty()) throw ConfigError(origins.of("exec") + ": names no program");
  } else if (vm.count("exec-args")) {
    throw ConfigError("unexpected argument '" +
                      vm["exec-args"].as<std::vector<std::string>>().front() +
                      "' (arguments are only taken after --exec PROGRAM)");
  }
  text("pidfile", config.pidfile);
  text("chdir", config.chdir);
  if (vm.count("env")) config.env = vm["env"].as<std::vector<std::string>>();
  for (const std::string& e : config.env)
    if (e.find('=') == std::string::npos || e.front() == '=')
      throw ConfigError(origins.of("env") + ": '" + e + "' is not NAME=VALUE");
  config.clear_env = vm["clear-env"].as<bool>();
  return ParseOutcome::Run;
}

} // namespace fcgi_host
