#include "fcgi_host/cli/config.hpp"

#include "fcgi_host/cli/config_file.hpp"
#include "fcgi_host/cli/help_text.hpp"
#include "fcgi_host/config/version.hpp"
#include "fcgi_host/net/client_filter.hpp"
#include "fcgi_host/observe/access_log.hpp"
#include "fcgi_host/runners/plugin.hpp" // plugin_abi_text
#include "fcgi_host/runners/script_gate.hpp"
#include "process_manager/cpu_quota.hpp"
#include "process_manager/log.hpp"

#include <boost/program_options.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <map>
#include <ostream>
#include <set>
#include <sstream>
#include <sys/stat.h>

namespace po = boost::program_options;

namespace fcgi_host {
namespace {

// No abbreviations: `--work 2` must not silently mean --workers.
constexpr int kStyle = po::command_line_style::unix_style & ~po::command_line_style::allow_guessing;

// The parser's view of kOptions: every value is text, checked and converted by the steps below,
// so that a default reads the same in the table, in --help and in the file.
po::options_description describe() {
  po::options_description all("Options (also valid as `name = value` in the --config file)");
  for (const OptionSpec& o : kOptions) {
    std::string names(o.name);
    if (o.short_name) names += std::string(",") + o.short_name;
    std::string value_name(o.value_name);
    std::string help(o.description);
    po::value_semantic* semantic = nullptr;
    if (o.kind == OptionKind::Command && value_name.empty()) {
      semantic = po::bool_switch();
    } else if (o.kind == OptionKind::OnOff) {
      // --name alone (the switch it once was) means on.
      semantic = po::value<std::string>()
                     ->value_name(value_name)
                     ->default_value(std::string(o.default_text))
                     ->implicit_value("on");
    } else if (o.kind == OptionKind::List) {
      semantic = po::value<std::vector<std::string>>()->value_name(value_name)->composing();
    } else if (o.default_text.empty()) {
      semantic = po::value<std::string>()->value_name(value_name);
    } else {
      semantic = po::value<std::string>()
                     ->value_name(value_name)
                     ->default_value(std::string(o.default_text));
    }
    all.add_options()(names.c_str(), semantic, help.c_str());
  }
  return all;
}

// A parse error of Boost, phrased for an operator.
ConfigError config_error(const po::error& e, const std::string& prefix = "",
                         const std::string& hint = "") {
  return ConfigError(prefix + e.what() + hint);
}

// The command line split at `--exec PROGRAM`: the host's words, and the program's.
struct CommandLine {
  std::vector<std::string> host;
  std::vector<std::string> program; // PROGRAM and its arguments; empty without --exec
};

// A host option after `--exec PROGRAM` would go to the program, and the host would start without
// it (`--exec php-cgi --sandbox on` ran with no sandbox): refused unless `--` says the words are
// the program's.
void refuse_host_options_after(const std::vector<std::string>& program) {
  for (std::size_t i = 1; i < program.size(); ++i) {
    const std::string& w = program[i];
    if (!w.starts_with("--")) continue;
    const std::string name =
        w.substr(2, w.find('=') == std::string::npos ? std::string::npos : w.find('=') - 2);
    if (find_option(name))
      throw ConfigError("'" + w + "' after --exec " + program.front() +
                        " is an option of fcgi-host, which would go to the program: put it "
                        "before --exec, or, for the program, write --exec " +
                        program.front() + " -- ARGS");
  }
}

CommandLine split_at_exec(int argc, const char* const* argv) {
  CommandLine line;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--") {
      throw ConfigError("unexpected '--' (it only separates --exec PROGRAM from the program's "
                        "options: --exec PROGRAM -- ARGS)");
    }
    if (a == "--exec" || a.starts_with("--exec=")) {
      if (a == "--exec") {
        if (i + 1 >= argc) throw ConfigError("--exec: names no program");
        line.program.emplace_back(argv[++i]);
      } else {
        line.program.emplace_back(a.substr(7));
      }
      const bool separated = i + 1 < argc && std::string_view(argv[i + 1]) == "--";
      if (separated) ++i;
      for (++i; i < argc; ++i)
        line.program.emplace_back(argv[i]);
      if (line.program.front().empty()) throw ConfigError("--exec: names no program");
      if (!separated) refuse_host_options_after(line.program);
      break;
    }
    line.host.emplace_back(a);
  }
  return line;
}

// `--clear-env off` as `--clear-env=off`: an on|off option also stands alone (meaning on), so the
// parser takes its value only after `=`; a following `on` or `off` is that value all the same.
std::vector<std::string> join_on_off_values(const std::vector<std::string>& words) {
  std::vector<std::string> out;
  for (std::size_t i = 0; i < words.size(); ++i) {
    const std::string& w = words[i];
    const OptionSpec* spec = w.starts_with("--") ? find_option(w.substr(2)) : nullptr;
    if (spec && spec->kind == OptionKind::OnOff && i + 1 < words.size() &&
        (words[i + 1] == "on" || words[i + 1] == "off")) {
      out.push_back(w + "=" + words[++i]);
    } else {
      out.push_back(w);
    }
  }
  return out;
}

std::vector<std::string> split_words(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string word; in >> word;)
    out.push_back(word);
  return out;
}

// The parsed values with their origins, and typed readers whose errors name the option.
class Values {
public:
  Values(po::variables_map& vm, Config& config) : vm_(vm), config_(config) {}

  bool given(const char* name) const { return vm_.count(name) && !vm_[name].defaulted(); }
  bool has(const char* name) const { return vm_.count(name) != 0; }
  std::string text(const char* name) const {
    return has(name) ? vm_[name].as<std::string>() : std::string();
  }
  void text(const char* name, std::string& out) const {
    if (has(name)) out = vm_[name].as<std::string>();
  }
  std::vector<std::string> list(const char* name) const {
    return has(name) ? vm_[name].as<std::vector<std::string>>() : std::vector<std::string>{};
  }
  bool flag(const char* name) const { return vm_[name].as<bool>(); }

  ConfigError error(const char* name, const std::string& why) const {
    return ConfigError(config_.where(name) + ": " + why);
  }

  // A whole number in `base` (10, or 8 for a mode), between min and max.
  long long integer(const char* name, long long min, long long max, int base = 10) const {
    const std::string t = text(name);
    std::size_t pos = 0;
    long long v = 0;
    try {
      v = std::stoll(t, &pos, base);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (t.empty() || pos != t.size())
      throw error(name,
                  "'" + t + (base == 8 ? "' is not an octal number" : "' is not a whole number"));
    if (v < min || v > max)
      throw error(name, "must be from " + std::to_string(min) + " to " + std::to_string(max) +
                            ", got " + t);
    return v;
  }

  std::chrono::milliseconds seconds(const char* name, bool allow_zero) const {
    const double v = number(name, "a number of seconds");
    if (v < 0 || (!allow_zero && v == 0) || v > 86400.0 * 365)
      throw error(name, std::string("must be ") + (allow_zero ? "0 or more" : "more than 0") +
                            " seconds (up to a year)");
    return std::chrono::milliseconds(static_cast<long long>(std::llround(v * 1000)));
  }

  // A decimal number (a ratio, a factor) from min to max.
  double decimal(const char* name, double min, double max) const {
    const double v = number(name, "a number");
    auto shown = [](double d) {
      std::ostringstream o;
      o << d;
      return o.str();
    };
    if (v < min || v > max)
      throw error(name, "must be from " + shown(min) + " to " + shown(max) + ", got " + text(name));
    return v;
  }

  // The option's value as a finite number; `what` says what it should be when it is not one.
  double number(const char* name, const char* what) const {
    const std::string t = text(name);
    std::size_t pos = 0;
    double v = 0;
    try {
      v = std::stod(t, &pos);
    } catch (const std::exception&) {
      pos = 0;
    }
    if (t.empty() || pos != t.size() || !std::isfinite(v))
      throw error(name, "'" + t + "' is not " + what);
    return v;
  }

  std::size_t size(const char* name) const {
    const std::string t = text(name);
    std::size_t pos = 0;
    unsigned long long value = 0;
    try {
      value = std::stoull(t, &pos);
    } catch (const std::exception&) {
      throw error(name, "'" + t + "' is not a size (BYTES, or a number with K, M, G)");
    }
    std::string suffix = t.substr(pos);
    unsigned shift = 0;
    if (suffix == "k" || suffix == "K")
      shift = 10;
    else if (suffix == "m" || suffix == "M")
      shift = 20;
    else if (suffix == "g" || suffix == "G")
      shift = 30;
    else if (!suffix.empty())
      throw error(name, "'" + t + "' has an unknown suffix (use K, M or G)");
    if (t[0] == '-' || value > (~0ull >> shift)) throw error(name, "'" + t + "' is out of range");
    return static_cast<std::size_t>(value << shift);
  }

  ListenAddress address(const char* name) const {
    ListenAddress a;
    std::string why;
    if (!parse_listen_address(text(name), a, why))
      throw error(name, "'" + text(name) + "' is not an address: " + why);
    return a;
  }

private:
  po::variables_map& vm_;
  Config& config_;
};

// A file line `name = value`, as the command line would give it.
std::vector<std::string> file_line_as_argument(const std::string& where, const std::string& name,
                                               const std::string& value) {
  // An on|off option (clear-env) takes true and false too, as the switch it once was and as
  // php-fpm's `clear_env = no`.
  if (const OptionSpec* spec = find_option(name); spec && spec->kind == OptionKind::OnOff) {
    if (value == "false" || value == "no" || value == "off" || value == "0")
      return {"--" + name + "=off"};
    if (value != "true" && value != "yes" && value != "on" && value != "1")
      throw ConfigError(where + ": " + name + " takes on or off, not '" + value + "'");
    return {"--" + name + "=on"};
  }
  return {"--" + name + "=" + value};
}

// The lines of `file` this process takes: without pools, all of them; in the pools form, the
// globals, then the section of --pool (which may set again what the globals set), or only the
// globals for the master that runs every pool.
std::vector<const ConfigLine*> lines_for(const ConfigFile& file, const Config& config) {
  std::vector<const ConfigLine*> lines;
  for (const ConfigLine& l : file.globals)
    // status-listen before the first section is the master of the pools' own status socket.
    // So is health-listen: each pool names its own in its section.
    if (config.pool.empty() || (l.name != "status-listen" && l.name != "health-listen"))
      lines.push_back(&l);
  if (config.pool.empty()) return lines;
  const PoolSection* pool = file.find_pool(config.pool);
  if (!pool)
    throw ConfigError("--pool: \"" + config.config_file + "\" defines no pool [" + config.pool +
                      "]");
  std::erase_if(lines, [pool](const ConfigLine* g) {
    return std::any_of(pool->lines.begin(), pool->lines.end(),
                       [g](const ConfigLine& l) { return l.name == g->name; });
  });
  for (const ConfigLine& l : pool->lines)
    lines.push_back(&l);
  return lines;
}

// "pools.d/a.conf" of "pools.d/a.conf:3 [a]".
std::string file_of(const std::string& where) {
  std::string w = where.substr(0, where.rfind(" ["));
  return w.substr(0, w.rfind(':'));
}

// Stores the file's lines. Each line is parsed on its own, so that an error names its line.
// A list option (env) may repeat; any other option given twice in one scope is an error.
void parse_config_file(const po::options_description& options, po::variables_map& vm,
                       Config& config) {
  const ConfigFile file = read_config_file(config.config_file);
  if (file.has_pools && config.pool.empty())
    for (const PoolSection& p : file.pools)
      config.pools.push_back(p.name);
  if (!file.has_pools && !config.pool.empty())
    throw ConfigError("--pool: \"" + config.config_file + "\" defines no pools");
  std::map<std::string, std::string> seen; // name + scope -> where
  std::set<std::string> from_command_line;
  for (const auto& [name, value] : vm)
    if (!value.defaulted()) from_command_line.insert(name);
  config.config_files = {config.config_file};
  for (const ConfigLine* l : lines_for(file, config)) {
    if (std::string f = file_of(l->where);
        std::find(config.config_files.begin(), config.config_files.end(), f) ==
        config.config_files.end())
      config.config_files.push_back(f);
    const OptionSpec* spec = find_option(l->name);
    if (spec && spec->kind == OptionKind::Command)
      throw ConfigError(l->where + ": " + l->name + " cannot be set in a config file");
    bool repeatable = spec && spec->kind == OptionKind::List;
    const auto section = l->where.rfind(" [");
    const std::string scope = section == std::string::npos ? "" : l->where.substr(section);
    if (auto [it, fresh] = seen.emplace(l->name + scope, l->where); !fresh && !repeatable)
      throw ConfigError(l->where + ": " + l->name + " is given twice (first at " + it->second +
                        ")");
    if (from_command_line.count(l->name)) continue; // the command line wins
    std::vector<std::string> arg = file_line_as_argument(l->where, l->name, l->value);
    if (arg.empty()) continue;
    try {
      po::store(po::command_line_parser(arg).options(options).style(kStyle).run(), vm);
    } catch (const po::error& e) {
      throw config_error(e, l->where + ": ");
    }
    config.origins[l->name] = l->where + ": " + l->name;
  }
}

// Every option as it was given ("name = value" lines, in name order, defaults left out): what a
// reload of a pool compares.
std::string settings_text(const po::variables_map& vm) {
  std::string text;
  for (const auto& [name, value] : vm) {
    if (value.defaulted() || name == "pool" || name == "test-config") continue;
    if (const auto* one = boost::any_cast<std::string>(&value.value()))
      text += name + " = " + *one + "\n";
    else if (const auto* many = boost::any_cast<std::vector<std::string>>(&value.value()))
      for (const std::string& v : *many)
        text += name + " = " + v + "\n";
    else if (const auto* on = boost::any_cast<bool>(&value.value()))
      text += name + " = " + (*on ? "true" : "false") + "\n";
  }
  return text;
}

// ---- the steps of parse_config: one group of options each ---------------------------------------

void read_socket(const Values& v, Config& c) {
  if (v.has("listen")) c.listen = v.address("listen");
  c.backlog = static_cast<int>(v.integer("backlog", 1, 65535));
  c.socket_mode = static_cast<mode_t>(v.integer("socket-mode", 0, 07777, 8));
  v.text("socket-owner", c.socket_owner);
  v.text("socket-group", c.socket_group);
}

void read_pool(const Values& v, Config& c) {
  if (v.has("workers")) {
    c.workers = static_cast<int>(v.integer("workers", 1, 512));
  } else {
    const process_manager::CpuCount cpus = process_manager::usable_cpu_count();
    c.workers = std::min(cpus.count, 512);
    c.workers_from = cpus.why;
  }
  c.threads = static_cast<int>(v.integer("threads", 1, 256));
  c.event_heartbeat = v.seconds("event-heartbeat", true);
  c.idle_work_after = std::chrono::milliseconds(v.integer("idle-work-after", 0, 86'400'000));
  const std::string trim = v.text("trim-when-idle");
  if (trim != "on" && trim != "off") throw v.error("trim-when-idle", "must be on or off");
  c.trim_when_idle = trim == "on";
  c.app = v.text("app");
  c.app_given = v.given("app");
  if (c.app.empty()) throw v.error("app", "must not be empty");
  c.pm = v.text("pm");
  if (c.pm != "static" && c.pm != "dynamic" && c.pm != "ondemand")
    throw v.error("pm", "'" + c.pm + "' is not one of static, dynamic, ondemand");
  c.min_spare = static_cast<int>(v.integer("min-spare", 0, 512));
  c.max_spare = static_cast<int>(v.integer("max-spare", 1, 512));
  c.max_workers = static_cast<int>(v.integer("max-workers", 0, 512));
  if (c.max_workers == 0) c.max_workers = c.workers;
  if (c.max_spare < c.min_spare) throw v.error("max-spare", "must not be below --min-spare");
  if (c.pm != "static" && c.max_workers < c.workers)
    throw v.error("max-workers", "must not be below --workers");
  c.idle_timeout = v.seconds("idle-timeout", false);
}

// --rollout and the canary's judgement (process_manager/rollout.hpp).
void read_rollout(const Values& v, Config& c) {
  const std::string mode = v.text("rollout");
  if (mode != "all" && mode != "canary") throw v.error("rollout", "must be all or canary");
  process_manager::RolloutSettings& r = c.rollout;
  r.mode =
      mode == "canary" ? process_manager::RolloutMode::Canary : process_manager::RolloutMode::All;
  r.canary_workers = static_cast<int>(v.integer("canary-workers", 1, 512));
  r.window = v.seconds("rollout-window", false);
  r.undo_on_errors = v.decimal("undo-on-errors", 0, 1);
  r.undo_on_latency = v.decimal("undo-on-latency", 1, 1000);
  r.step = static_cast<int>(v.integer("rollout-step", 0, 512));
}

void read_lifecycle(const Values& v, Config& c) {
  c.graceful_timeout = v.seconds("graceful-timeout", true);
  c.request_timeout = v.seconds("request-timeout", true);
  v.text("ready-path", c.ready_path);
  if (v.has("ready-path") && !c.ready_path.starts_with("/"))
    throw v.error("ready-path", "must start with /");
  c.reload_grace = v.seconds("reload-grace", true);
  const std::string watch = v.text("watch");
  if (watch != "on" && watch != "off") throw v.error("watch", "must be on or off");
  c.watch = watch == "on";
  const std::string mold = v.text("mold");
  if (mold != "on" && mold != "off") throw v.error("mold", "must be on or off");
  c.mold = mold == "on";
  constexpr long long kMax = 1ll << 62;
  c.max_requests = static_cast<unsigned long>(v.integer("max-requests", 0, kMax));
  c.max_requests_jitter = static_cast<unsigned long>(v.integer("max-requests-jitter", 0, kMax));
  c.max_rss_mib = static_cast<std::size_t>(v.integer("max-rss", 0, 1ll << 40));
}

void read_limits(const Values& v, Limits& l) {
  l.request.max_body = v.size("max-body");
  l.request.max_params_size = v.size("max-params-size");
  if (l.request.max_params_size < 1024)
    throw v.error("max-params-size", "must be at least 1024 bytes");
  l.request.max_params = static_cast<std::size_t>(v.integer("max-params", 8, 1ll << 32));
  l.request.max_records = static_cast<std::size_t>(v.integer("max-records", 4, 1ll << 40));
  l.max_connections = static_cast<std::size_t>(v.integer("max-connections", 1, 65536));
  l.header_timeout = v.seconds("header-timeout", false);
  l.body_timeout = v.seconds("body-timeout", false);
  l.keepalive_timeout = v.seconds("keepalive-timeout", false);
  l.write_timeout = v.seconds("write-timeout", false);
  l.body_min_rate = v.size("body-min-rate");
  l.max_buffered = v.size("max-buffered");
  if (l.max_buffered < l.request.max_body)
    throw v.error("max-buffered",
                  "must be at least --max-body (" + std::to_string(l.request.max_body) + " bytes)");
  l.spill_threshold = v.size("spill-threshold");
}

void read_responses(const Values& v, Config& c) {
  c.max_response_head = v.size("max-response-head");
  if (c.max_response_head < 256) throw v.error("max-response-head", "must be at least 256 bytes");
  c.send_file_mode = v.text("send-file-mode");
  if (c.send_file_mode != "stream" && c.send_file_mode != "x-accel-redirect" &&
      c.send_file_mode != "x-sendfile")
    throw v.error("send-file-mode",
                  "'" + c.send_file_mode + "' is not one of stream, x-accel-redirect, x-sendfile");
  c.x_accel_prefix = v.text("x-accel-prefix");
  if (!c.x_accel_prefix.starts_with("/")) throw v.error("x-accel-prefix", "must start with /");
}

void read_logs(const Values& v, Config& c) {
  v.text("error-log", c.error_log);
  c.log_level = v.text("log-level");
  process_manager::LogLevel level;
  if (!process_manager::parse_log_level(c.log_level, level))
    throw v.error("log-level",
                  "'" + c.log_level + "' is not one of debug, info, notice, warn, error, alert");
  v.text("access-log", c.access_log);
  if (v.given("access-format")) c.access_format = v.text("access-format");
  std::string why;
  if (!valid_access_format(v.text("access-format"), why)) throw v.error("access-format", why);
  c.slow_request_threshold = v.seconds("slow-request-threshold", true);
  c.max_queue_time = std::chrono::milliseconds(v.integer("max-queue-time", 0, 3'600'000));
  const std::string metrics = v.text("metrics");
  if (metrics != "on" && metrics != "off") throw v.error("metrics", "must be on or off");
  c.metrics = metrics == "on";
}

void read_capture(const Values& v, Config& c) {
  v.text("capture-crashes", c.capture_dir);
  if (v.has("capture-crashes") && !c.capture_dir.starts_with("/"))
    throw v.error("capture-crashes", "must be an absolute path (the crash block names the file)");
  while (c.capture_dir.size() > 1 && c.capture_dir.ends_with("/"))
    c.capture_dir.pop_back();
  if (c.capture_dir.size() > 160)
    throw v.error("capture-crashes", "must be at most 160 bytes long (the crash block's line)");
  c.capture_max_bytes = v.size("capture-max-bytes");
  if (c.capture_max_bytes < 4096 || c.capture_max_bytes > (std::size_t{1} << 30))
    throw v.error("capture-max-bytes", "must be from 4K to 1G");
  c.capture_max_files = static_cast<unsigned>(v.integer("capture-max-files", 1, 100000));
  c.capture_redact = v.list("capture-redact");
  for (const std::string& p : c.capture_redact)
    if (p.empty()) throw v.error("capture-redact", "an empty pattern matches nothing");
  const std::string body = v.text("capture-body");
  if (body != "on" && body != "off") throw v.error("capture-body", "must be on or off");
  c.capture_body = body == "on";
}

void read_status(const Values& v, Config& c) {
  v.text("status-path", c.status_path);
  v.text("ping-path", c.ping_path);
  v.text("ping-response", c.ping_response);
  v.text("status-listen", c.status_listen);
  for (const char* path : {"status-path", "ping-path"})
    if (v.has(path) && !v.text(path).starts_with("/")) throw v.error(path, "must start with /");
  if (v.has("status-listen")) v.address("status-listen");
  v.text("health-listen", c.health_listen);
  if (v.has("health-listen")) v.address("health-listen");
  c.ready_max_queue_time =
      std::chrono::milliseconds(v.integer("ready-max-queue-time", 0, 3'600'000));
}

void read_access_control(const Values& v, Config& c) {
  for (auto [list, patterns] :
       {std::pair{"allow-clients", &c.allow_clients}, std::pair{"status-allow", &c.status_allow},
        std::pair{"health-allow", &c.health_allow}}) {
    std::string why;
    if (v.has(list) && !parse_client_list(v.text(list), *patterns, why)) throw v.error(list, why);
  }
  // Status is closed by default: loopback and local Unix clients (the option's default). A TCP
  // status listener is reachable by every local user and maybe beyond: whom it answers must be
  // said, never assumed.
  if (!v.given("status-allow")) {
    if (v.has("status-listen") && v.address("status-listen").kind == ListenAddress::Kind::Tcp)
      throw v.error("status-listen", "a TCP status listener needs --status-allow (the addresses "
                                     "that may read it); or listen on a Unix socket");
  }
  if (!v.given("health-allow") && v.has("health-listen") &&
      v.address("health-listen").kind == ListenAddress::Kind::Tcp)
    throw v.error("health-listen", "a TCP health port needs --health-allow (the addresses that "
                                   "may read it: the kubelet's and Prometheus's)");
  v.text("user", c.user);
  v.text("group", c.group);
}

bool on_off(const Values& v, const char* name) {
  const std::string value = v.text(name);
  if (value != "on" && value != "off") throw v.error(name, "must be on or off");
  return value == "on";
}

void read_process_limits(const Values& v, Config& c) {
  if (v.has("rlimit-files"))
    c.rlimit_files = static_cast<unsigned long long>(v.integer("rlimit-files", 1, 1 << 30));
  if (v.has("rlimit-core"))
    c.rlimit_core =
        v.text("rlimit-core") == "unlimited" ? Config::kUnlimited : v.size("rlimit-core");
  if (v.has("nice")) c.nice = static_cast<int>(v.integer("nice", -20, 19));
  if (v.has("memory-max")) {
    c.memory_max = v.text("memory-max") == "max" ? Config::kUnlimited : v.size("memory-max");
    if (*c.memory_max < (1u << 20)) throw v.error("memory-max", "must be at least 1M (or max)");
  }
  if (v.has("cpu-weight")) c.cpu_weight = static_cast<int>(v.integer("cpu-weight", 1, 10000));
  c.max_workers_total = static_cast<int>(v.integer("max-workers-total", 0, 100000));
}

void read_process_setup(const Values& v, Config& c, const CommandLine& line) {
  // --exec PROGRAM ARGS on the command line; `exec = PROGRAM ARGS` (split at spaces) in the file.
  c.exec = line.program.empty() ? split_words(v.text("exec")) : line.program;
  if (line.program.empty() && v.has("exec") && c.exec.empty())
    throw v.error("exec", "names no program");
  v.text("pidfile", c.pidfile);
  v.text("chdir", c.chdir);
  c.env = v.list("env");
  for (const std::string& e : c.env)
    if (e.find('=') == std::string::npos || e.front() == '=')
      throw v.error("env", "'" + e + "' is not NAME=VALUE");
  c.clear_env = on_off(v, "clear-env");
  read_process_limits(v, c);
}

// A TCP port, 1 to 65535, of option `name`.
std::uint16_t tcp_port(const Values& v, const char* name, const std::string& text) {
  char* end = nullptr;
  const long port = std::strtol(text.c_str(), &end, 10);
  if (text.empty() || *end || port < 1 || port > 65535)
    throw v.error(name, "'" + text + "' is not a TCP port (1 to 65535)");
  return static_cast<std::uint16_t>(port);
}

void read_sandbox(const Values& v, Config& c) {
  c.sandbox = v.text("sandbox");
  if (c.sandbox != "off" && c.sandbox != "on" && c.sandbox != "best-effort" && c.sandbox != "log")
    throw v.error("sandbox", "'" + c.sandbox + "' is not one of on, off, best-effort, log");
  c.sandbox_read = v.list("sandbox-read");
  c.sandbox_write = v.list("sandbox-write");
  c.sandbox_exec = on_off(v, "sandbox-exec");
  c.private_tmp = on_off(v, "private-tmp");
  v.text("script-root", c.script_root);
  for (const char* name : {"sandbox-read", "sandbox-write"})
    for (const std::string& p : v.list(name))
      if (!p.starts_with("/")) throw v.error(name, "\"" + p + "\" is not an absolute path");
  if (v.has("script-root") && !c.script_root.starts_with("/"))
    throw v.error("script-root", "must be an absolute path");
  for (const std::string& text : v.list("script-extensions")) {
    std::string why;
    if (!parse_script_extensions(text, c.script_extensions, why))
      throw v.error("script-extensions", why);
  }
  c.sandbox_connect = v.list("sandbox-connect");
  for (const std::string& target : c.sandbox_connect) {
    // HOST:PORT, HOST a name, an IPv4 address or [an IPv6 address].
    const std::size_t colon = target.rfind(':');
    if (colon == std::string::npos || colon == 0)
      throw v.error("sandbox-connect", "'" + target + "' is not HOST:PORT");
    c.sandbox_connect_ports.push_back(tcp_port(v, "sandbox-connect", target.substr(colon + 1)));
  }
  for (const std::string& port : v.list("sandbox-bind"))
    c.sandbox_bind_ports.push_back(tcp_port(v, "sandbox-bind", port));
  if (c.sandbox == "off")
    for (const char* name :
         {"sandbox-read", "sandbox-write", "sandbox-exec", "sandbox-connect", "sandbox-bind"})
      if (v.given(name)) throw v.error(name, "has no effect without --sandbox");
  for (const char* name : {"script-root", "script-extensions"})
    if (v.has(name) && c.exec.empty())
      throw v.error(name, "is for --exec programs (a built-in handler reads what its own code "
                          "opens: list it with --sandbox-read)");
}

// In --exec mode the workers are another program: what only the host's own workers do is refused
// rather than silently ignored. --status-listen is served by the master and stays.
void refuse_worker_features_in_exec_mode(const Values& v, const Config& c) {
  if (c.exec.empty()) return;
  for (const char* name :
       {"app", "status-path", "ping-path", "access-log", "access-format", "capture-crashes"})
    if (v.given(name))
      throw v.error(name, "not available with --exec (the program answers its own requests; "
                          "--status-listen serves status and ping from the master)");
  if (c.slow_request_threshold.count() != 0)
    throw v.error("slow-request-threshold", "not available with --exec");
  if (c.mold)
    throw v.error("mold", "not available with --exec (the program is exec'd in each worker: "
                          "there is nothing to load once and share)");
}

} // namespace

int default_worker_count() {
  return std::min(process_manager::usable_cpu_count().count, 512);
}

void print_help(std::ostream& out) {
  out << "Usage: fcgi-host [OPTIONS] [--exec PROGRAM [--] [ARGS...]]\n"
      << "       fcgi-host status --connect ADDR [--path PATH]\n"
      << "                        [--json|--openmetrics|--prometheus|--html] [--full]\n"
      << "                        [--max-queue N] [--timeout SECONDS]\n"
      << "       fcgi-host ping --connect ADDR [--path PATH] [--timeout SECONDS]\n"
      << "       fcgi-host replay FILE [--set-param NAME=VALUE]... [OPTIONS]\n"
      << "       fcgi-host reload [POOL] --connect ADDR [--timeout SECONDS]\n"
      << "       fcgi-host scale [POOL] N --connect ADDR [--timeout SECONDS]\n"
      << "       fcgi-host status|ping|replay|reload|scale --help\n"
      << "A FastCGI application host: a master process preforks workers that accept on one\n"
      << "listening socket (nginx: fastcgi_pass) and run a C++ handler.\n\n"
      << describe() << "\n"
      << kClientCommandsHelp << "\n"
      << kReplayHelp << "\n"
      << kSignalsHelp << "\n"
      << kExitCodesHelp;
}

ParseOutcome parse_config(int argc, const char* const* argv, Config& config, std::ostream& out) {
  const po::options_description options = describe();
  const CommandLine line = split_at_exec(argc, argv);
  po::variables_map vm;
  try {
    po::parsed_options parsed =
        po::command_line_parser(join_on_off_values(line.host)).options(options).style(kStyle).run();
    for (const std::string& word : po::collect_unrecognized(parsed.options, po::include_positional))
      throw ConfigError("unexpected argument '" + word +
                        "' (a program and its arguments go after --exec PROGRAM)");
    po::store(parsed, vm);
  } catch (const po::error& e) {
    throw config_error(e, "", line.program.empty() ? "" : " (host options go before --exec)");
  }
  if (vm["help"].as<bool>()) {
    print_help(out);
    return ParseOutcome::Exit;
  }
  if (vm["version"].as<bool>()) {
    out << "fcgi-host " << kVersion << "\nplugin ABI " << plugin_abi_text() << "\n";
    return ParseOutcome::Exit;
  }
  if (vm.count("pool")) config.pool = vm["pool"].as<std::string>();
  if (vm.count("config")) {
    config.config_file = vm["config"].as<std::string>();
    parse_config_file(options, vm, config);
  } else if (!config.pool.empty()) {
    throw ConfigError("--pool: names a pool of --config FILE, and no --config is given");
  }
  try {
    po::notify(vm);
  } catch (const po::error& e) {
    throw config_error(e);
  }
  config.settings_text = settings_text(vm);
  const Values values(vm, config);
  config.test_config = values.flag("test-config");
  read_socket(values, config);
  read_pool(values, config);
  read_lifecycle(values, config);
  read_rollout(values, config);
  read_limits(values, config.limits);
  read_responses(values, config);
  config.handoff_after = values.seconds("handoff-after", true);
  read_logs(values, config);
  read_capture(values, config);
  read_status(values, config);
  read_access_control(values, config);
  read_process_setup(values, config, line);
  read_sandbox(values, config);
  refuse_worker_features_in_exec_mode(values, config);
  return ParseOutcome::Run;
}

} // namespace fcgi_host
