#include "fcgi_host/run.hpp"

#include "fcgi_host/cli/app_source.hpp"
#include "fcgi_host/cli/client_commands.hpp"
#include "fcgi_host/cli/config.hpp"
#include "fcgi_host/cli/master_control.hpp"
#include "fcgi_host/cli/plan_pools.hpp"
#include "fcgi_host/cli/process_limits.hpp"
#include "fcgi_host/cli/replay_command.hpp"
#include "fcgi_host/cli/settings_from_config.hpp"
#include "fcgi_host/cli/start_checks.hpp"
#include "fcgi_host/cli/upgrade_handover.hpp"
#include "fcgi_host/net/fd_flags.hpp"
#include "fcgi_host/net/listen_socket.hpp"
#include "fcgi_host/observe/access_log.hpp"
#include "fcgi_host/observe/health_server.hpp"
#include "fcgi_host/observe/host_slot.hpp"
#include "fcgi_host/observe/served_figures.hpp"
#include "fcgi_host/observe/status_server.hpp"
#include "fcgi_host/pools/cgroups.hpp"
#include "fcgi_host/pools/member.hpp"
#include "fcgi_host/pools/supervisor.hpp"
#include "fcgi_host/protocol/capture_redaction.hpp"
#include "fcgi_host/runners/exec_worker.hpp"
#include "fcgi_host/runners/mold_boot.hpp"
#include "fcgi_host/sandbox/private_tmp.hpp"
#include "fcgi_host/sandbox/sandbox.hpp"
#include "fcgi_host/sandbox/sandbox_hint.hpp"
#include "fcgi_host/sys_error.hpp"
#include "fcgi_host/worker/handed_logs.hpp"
#include "fcgi_host/worker/output_capture.hpp"
#include "fcgi_host/worker/process_setup.hpp"
#include "fcgi_host/worker/worker.hpp"
#include "process_manager/argv.hpp"
#include "process_manager/count_text.hpp"
#include "process_manager/exit_codes.hpp"
#include "process_manager/file_watch.hpp"
#include "process_manager/inherited_fds.hpp"
#include "process_manager/log.hpp"
#include "process_manager/master.hpp"
#include "process_manager/pidfile.hpp"
#include "process_manager/uri_redaction.hpp"

#include <csignal>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

namespace fcgi_host {
namespace {

using process_manager::LogLevel;
namespace exit_code = process_manager::exit_code;

// USR2: the directory the first master was started in, where a relative --app is found.
constexpr const char* kStartDirVariable = "FCGI_HOST_START_DIR";

// --private-tmp: the pool's /tmp, made once by the master (root) and joined by every worker.
// Without the privilege, --sandbox best-effort goes on without it (start_checks refused it
// otherwise); any other failure refuses the start or the reload.
void open_private_tmp(SandboxSettings& sandbox) {
  if (!sandbox.private_tmp) return;
  std::string error;
  sandbox.private_tmp_fd = private_tmp_namespace(error);
  if (sandbox.private_tmp_fd >= 0) return;
  if (sandbox.mode != SandboxMode::BestEffort) throw StartupError("private-tmp: " + error);
  PM_LOG(LogLevel::Warn, "sandbox best-effort, not applied: private /tmp: " + error);
  sandbox.private_tmp = false;
}

// --mold on: the generation's mold sets itself up as a worker would, loads the plugin from a
// copy of its own and runs the mold hook (runners/mold_boot.hpp); its workers create their
// handlers from what it loaded, and learn from the plugin's table whether one serves all threads.
void add_mold(process_manager::Generation& g, const AppSource& app,
              const WorkerSettings& settings) {
  const MoldSetup setup{settings.credentials, settings.clear_env, settings.env, settings.sandbox,
                        settings.output_fd,   app.plugin,         ::geteuid(),  ::getegid()};
  std::shared_ptr<PluginLoader> loader =
      app.plugin.empty() ? nullptr : std::make_shared<PluginLoader>(app.plugin, app.plugin);
  g.mold = process_manager::MoldPlan{};
  g.mold->boot = [setup, loader](int kept_fd) { return boot_mold(setup, loader, kept_fd); };
  HandlerFactory factory = loader ? plugin_factory(loader) : app.factory();
  WorkerSettings molded = settings;
  molded.handler_thread_safe = app.thread_safe();
  g.worker_main = [molded, factory, loader](const process_manager::WorkerContext& context) {
    if (!loader) return run_worker(context, molded, factory);
    WorkerSettings s = molded;
    try {
      s.handler_thread_safe = loader->thread_safe(); // loaded by the mold
    } catch (const std::exception& e) {
      return process_manager::boot_failure(context, e.what());
    }
    return run_worker(context, s, factory);
  };
}

process_manager::Generation make_generation(const Config& config, const AppSource& app,
                                            const WorkerPlumbing& plumbing) {
  WorkerSettings settings = worker_settings(config, plumbing);
  open_private_tmp(settings.sandbox);
  process_manager::Generation g;
  g.pool = pool_settings(config, plumbing.handoff.enabled());
  if (settings.sandbox.enabled() || settings.sandbox.private_tmp)
    g.explain_boot_failure = [sandbox = settings.sandbox](const std::string& why) {
      return sandbox_boot_hint(sandbox, why);
    };
  if (!config.exec.empty()) {
    ExecSettings exec{plumbing.listen_fd,
                      config.exec,
                      settings.credentials,
                      config.clear_env,
                      config.env,
                      settings.sandbox,
                      {config.script_root, config.script_extensions},
                      settings.limits.request};
    g.worker_main = [exec](const process_manager::WorkerContext& context) {
      return run_exec_worker(context, exec);
    };
    return g;
  }
  if (config.mold) {
    add_mold(g, app, settings);
    return g;
  }
  HandlerFactory factory = app.factory();
  settings.handler_thread_safe = app.thread_safe();
  g.worker_main = [settings, factory](const process_manager::WorkerContext& context) {
    return run_worker(context, settings, factory);
  };
  return g;
}

void configure_log(const Config& config) {
  auto& log = process_manager::Log::get();
  LogLevel level = LogLevel::Notice;
  process_manager::parse_log_level(config.log_level, level);
  log.set_level(level);
  try {
    log.open(config.error_log);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("error-log: ") + e.what());
  }
  // Opened here, before the fork: workers inherit the descriptor (and reopen it on USR1).
  try {
    AccessLog::get().open(config.access_log, config.access_format);
  } catch (const std::exception& e) {
    throw std::runtime_error(std::string("access-log: ") + e.what());
  }
}

// Until the master routes them to its loop, the control signals would kill the process with
// their default action: a HUP or USR1 sent as soon as the socket accepts must not.
void hold_control_signals() {
  sigset_t held;
  sigemptyset(&held);
  for (int s : {SIGHUP, SIGUSR1, SIGUSR2, SIGTTIN, SIGTTOU, SIGQUIT, SIGTERM, SIGINT})
    sigaddset(&held, s);
  sigprocmask(SIG_BLOCK, &held, nullptr);
}

// Start-up stops here with this exit code and message (also logged when `log`).
struct StartFailure {
  int code;
  std::string message;
  bool log = false;
};

// What the master holds while it runs, built step by step by run_host.
struct Host {
  std::vector<std::string> args; // for reload and USR2
  app::Handler* own = nullptr;
  std::string start_dir;        // where a relative --app is found, at start and at every reload
  bool own_thread_safe = false; // run_thread_safe()
  Config config;
  AppSource app;
  std::shared_ptr<PluginDirectory> plugins; // the generations' private copies of the plugin
  std::unique_ptr<process_manager::FileWatch> watch; // --watch (made also when off: a reload
                                                     // may turn it on)
  std::vector<int> strays;                           // inherited fds closed at start
  int upgrade_fd = -1;                               // USR2: tell the old master we are ready
  int adopted_fd = -1;                               // USR2: the old master's listening socket
  std::unique_ptr<ListenSocket> listener; // null when the socket came from the old master
  SocketFile adopted_file;                // USR2: the socket file the old master bound
  int adopted_status_fd = -1;             // USR2: the old master's status socket
  SocketFile adopted_status_file;         // USR2: and its file
  int adopted_health_fd = -1;             // USR2: the old master's health port
  SocketFile adopted_health_file;         // USR2: and its file
  int listen_fd = -1;
  int output_fd = -1;       // the write end of the OutputCapture, for every generation (-1: none)
  HandoffChannel handoff;   // kept connections move between the workers of every generation
  bool handed_over = false; // USR2 succeeded: the socket file now belongs to the new master
  std::unique_ptr<OutputCapture> output;
  std::unique_ptr<StatusServer> status_server;
  std::unique_ptr<HealthServer> health_server;
  std::unique_ptr<process_manager::Pidfile> pidfile;
  process_manager::MasterOptions options;
  int pools_master_fd = -1;       // a pool's master: readable once the master of the pools is gone
  bool status_of_own_pid = false; // its status socket is named by its pid: never handed over

  bool exec_mode() const { return !config.exec.empty(); }
  // What every generation's workers are handed (read at each reload: the fds are set up after
  // the reload is prepared).
  WorkerPlumbing plumbing() const { return WorkerPlumbing{listen_fd, output_fd, handoff}; }
};

// Options, config file and every check short of binding and forking. False: done (--help,
// --version, --test-config).
bool read_config(Host& host) {
  process_manager::Argv argv(host.args);
  try {
    if (parse_config(argv.argc(), argv.cdata(), host.config, std::cout) == ParseOutcome::Exit)
      return false;
    if (!host.config.pools.empty()) return true; // run_pool_master checks every pool
    host.app = resolve_app(host.config, host.own, host.start_dir, host.own_thread_safe);
    check_before_start(host.config);
    credentials(host.config);
    // The plugin is loaded by a child that dropped privileges, also for --test-config; with
    // --mold by the mold, which copies it itself: the master never opens it.
    if (!host.app.plugin.empty() && (!host.config.mold || host.config.test_config)) {
      host.plugins = plugin_directory(host.config, nullptr);
      copy_and_check_plugin(host.app, host.config, host.plugins);
    }
  } catch (const ConfigError& e) {
    throw StartFailure{exit_code::kUsage, e.what()};
  } catch (const StartupError& e) {
    throw StartFailure{exit_code::kUsage, e.what()};
  }
  if (!host.config.test_config) return true;
  for (const std::string& note : addresses_in_use(host.config))
    std::cout << "fcgi-host: note: " << note << "\n";
  std::cout << "fcgi-host: configuration"
            << (host.config.config_file.empty() ? "" : " in " + host.config.config_file)
            << " is valid\n"
            << "fcgi-host: sandbox " << sandbox_line(host.config) << "\n";
  for (const std::string& risk : risky_settings(host.config))
    std::cout << "fcgi-host: warning: " << risk << "\n";
  return false;
}

// Before the log or anything else of ours is open: whatever is open now was inherited, and
// workers must not see it.
void close_strays(Host& host) {
  host.strays = process_manager::close_inherited_fds(inherited_fds_to_keep());
}

void open_logs(const Host& host) {
  try {
    configure_log(host.config);
  } catch (const std::exception& e) {
    throw StartFailure{exit_code::kStartupFailure, e.what()};
  }
}

// Binds the socket, or takes the one of the old master after USR2.
void open_listener(Host& host) {
  try {
    if (host.adopted_fd < 0)
      host.listener = std::make_unique<ListenSocket>(listen_options(host.config));
  } catch (const StartupError& e) {
    throw StartFailure{exit_code::kStartupFailure, e.what(), !host.config.error_log.empty()};
  }
  host.listen_fd = host.listener ? host.listener->fd() : host.adopted_fd;
  // Workers accept without blocking, so that one of them can wait on its kept connections and
  // the listening socket together. O_NONBLOCK belongs to the open socket, shared by every
  // process: in exec mode it stays blocking, as libfcgi programs expect.
  if (!set_nonblocking(host.listen_fd, !host.exec_mode()))
    throw StartFailure{exit_code::kStartupFailure, sys_error("fcntl(O_NONBLOCK)", "listen socket")};
  host.options.listen_fd = host.listen_fd;
  host.options.ready_fd = host.upgrade_fd;
  host.options.host_area = kHostArea;           // the host's counters beside each worker's slot
  host.options.served_figures = served_figures; // --rollout canary's judgement
  host.options.latency_bounds_ns = served_latency_bounds();
  host.options.scoreboard_threads = static_cast<std::size_t>(host.config.threads);
}

// Kept connections move between the workers of every generation through one channel, made here
// or, after USR2, taken over from the old master. Also with --handoff-after 0: a stopping
// worker always passes its kept connections on.
void open_handoff_channel(Host& host) {
  if (host.exec_mode()) return;
  host.handoff = take_handoff_channel();
  if (host.handoff.enabled()) return;
  try {
    host.handoff = make_handoff_channel();
  } catch (const StartupError& e) {
    throw StartFailure{exit_code::kStartupFailure, e.what()};
  }
}

// What --watch watches: the plugin (or --exec's program) and the configuration files, by
// absolute path (the master changes directory to --chdir).
std::vector<std::string> watched_files(const Host& host, const Config& config,
                                       const AppSource& app) {
  std::vector<std::string> files;
  if (!config.watch) return files;
  if (!app.plugin.empty()) files.push_back(app.plugin);
  if (!config.exec.empty() && config.exec.front().find('/') != std::string::npos)
    files.push_back(plugin_file(config.exec.front(), host.start_dir));
  for (const std::string& f : config.config_files)
    files.push_back(plugin_file(f, host.start_dir));
  return files;
}

void rewatch(Host& host, const Config& config, const AppSource& app) {
  if (!host.watch) return;
  for (const std::string& why : host.watch->watch(watched_files(host, config, app)))
    PM_LOG(LogLevel::Error, "watch: " + why + "; changes there are not seen");
}

// --watch on: a settled change to a watched file reloads as HUP does (a reload that fails keeps
// the running generation, as after HUP).
void watch_files(Host& host) {
  try {
    host.watch = std::make_unique<process_manager::FileWatch>(std::chrono::milliseconds{300});
  } catch (const std::exception& e) {
    if (host.config.watch) PM_LOG(LogLevel::Error, std::string("watch: ") + e.what());
    return;
  }
  host.options.watch_fds.push_back(host.watch->inotify_fd());
  host.options.watch_fds.push_back(host.watch->timer_fd());
  rewatch(host, host.config, host.app);
}

void on_watch_readable(Host& host, int fd) {
  if (!host.watch) return;
  if (std::optional<std::string> changed = host.watch->on_readable(fd)) {
    PM_LOG(LogLevel::Notice, "watch: " + *changed + " changed; reloading");
    ::kill(::getpid(), SIGHUP); // the master's own HUP: one way to reload
  }
}

// HUP: parse the same command line again; a bad config keeps the running one.
void prepare_reload(Host& host) {
  host.options.reload = [&host, args = host.args, own = host.own, own_safe = host.own_thread_safe,
                         first_threads = host.config.threads, first_address = host.config.listen,
                         exec_mode =
                             host.exec_mode()]() -> std::optional<process_manager::Generation> {
    process_manager::Argv argv(args);
    Config next;
    try {
      std::ostringstream ignored;
      parse_config(argv.argc(), argv.cdata(), next, ignored);
      if (next.listen.to_string() != first_address.to_string())
        PM_LOG(LogLevel::Warn, "reload: listen cannot change without a restart; keeping " +
                                   first_address.to_string());
      if (next.exec.empty() == exec_mode)
        throw StartupError("--exec cannot be added or removed without a restart (the socket "
                           "is blocking for exec'd programs, non-blocking for built-in workers)");
      if (next.threads > first_threads)
        throw StartupError("--threads " + std::to_string(next.threads) +
                           " needs a restart (the scoreboard was made for " +
                           std::to_string(first_threads) + ")");
      AppSource app = resolve_app(next, own, host.start_dir, own_safe);
      check_before_start(next);
      if (!app.plugin.empty() && !next.mold) { // with --mold, the new mold copies and loads it
        host.plugins = plugin_directory(next, host.plugins);
        copy_and_check_plugin(app, next, host.plugins);
      }
      configure_log(next);
      rewatch(host, next, app);
      return make_generation(next, app, host.plumbing());
    } catch (const std::exception& e) {
      PM_LOG(LogLevel::Error,
             std::string("reload refused, the running configuration stays: ") + e.what());
      return std::nullopt;
    }
  };
  host.options.reopen_logs = [] {
    process_manager::Log::get().reopen();
    AccessLog::get().reopen();
  };
  host.options.log_fds = logs_to_hand; // the workers cannot reopen root's files themselves
}

// Workers' stdout and stderr go to the log, prefixed with their pid.
void capture_worker_output(Host& host) {
  try {
    host.output = std::make_unique<OutputCapture>();
    host.output_fd = host.output->write_fd();
    host.options.watch_fds.push_back(host.output->read_fd());
    host.options.on_worker_reaped = [output = host.output.get()](pid_t pid) {
      output->forget(pid);
    };
  } catch (const std::exception& e) {
    PM_LOG(LogLevel::Error, std::string(e.what()) + "; worker output is not captured");
  }
}

// A socket of the master's own at `text` (--status-listen, --health-listen): after USR2 the one
// the old master handed over, when it is bound to that address (a pool's master under the master
// of the pools names its status socket by its pid: the old master's is not its address, and is
// closed), else bound anew with `options`. Null when `text` is empty. Throws StartupError.
std::unique_ptr<ListenSocket> master_socket(const std::string& text, int& adopted_fd,
                                            SocketFile& adopted_file,
                                            ListenOptions (*options)(const Config&),
                                            const Config& config) {
  ListenAddress address;
  std::string why;
  parse_listen_address(text, address, why); // checked by parse_config
  if (adopted_fd >= 0 && (text.empty() || !is_bound_to(adopted_fd, address))) {
    ::close(std::exchange(adopted_fd, -1));
    adopted_file.forget();
  }
  if (text.empty()) return nullptr;
  if (adopted_fd >= 0)
    return std::make_unique<ListenSocket>(std::exchange(adopted_fd, -1), adopted_file, text);
  return std::make_unique<ListenSocket>(options(config));
}

// Opens a server of the master's own with `open`: a failure stops a fresh start; after USR2 (a
// socket that could not be handed over, held by the old master still) the master serves without
// it, and says so.
template <class Open> void open_or_go_without(const Host& host, const char* option, Open open) {
  try {
    open();
  } catch (const StartupError& e) {
    if (host.upgrade_fd < 0)
      throw StartFailure{exit_code::kStartupFailure, std::string(option) + ": " + e.what()};
    PM_LOG(LogLevel::Error, std::string(option) + ": " + e.what() + "; serving without it");
  }
}

// --status-listen: the master answers status and ping itself.
void open_status_server(Host& host) {
  open_or_go_without(host, "status-listen", [&host] {
    auto socket = master_socket(host.config.status_listen, host.adopted_status_fd,
                                host.adopted_status_file, status_listen_options, host.config);
    if (!socket) return;
    host.status_server = std::make_unique<StatusServer>(
        std::move(socket), observability_settings(host.config), host.listen_fd);
    host.options.watch_fds.push_back(host.status_server->fd());
  });
}

// --health-listen: the master answers probes and scrapes itself, over HTTP.
void open_health_server(Host& host) {
  open_or_go_without(host, "health-listen", [&host] {
    auto socket = master_socket(host.config.health_listen, host.adopted_health_fd,
                                host.adopted_health_file, health_listen_options, host.config);
    if (!socket) return;
    host.health_server =
        std::make_unique<HealthServer>(std::move(socket), health_settings(host.config),
                                       observability_settings(host.config), host.listen_fd);
    host.options.watch_fds.push_back(host.health_server->fd());
  });
}

// USR2: exec the binary on disk with the socket; it takes the pidfile over once ready.
void prepare_upgrade(Host& host) {
  UpgradeHandover handover;
  handover.listen_fd = host.listen_fd;
  handover.socket_file = host.listener ? host.listener->file() : host.adopted_file;
  handover.handoff = host.handoff;
  handover.pidfile_fd = host.pidfile ? host.pidfile->fd() : -1;
  if (host.status_server && !host.status_of_own_pid) {
    handover.status_fd = host.status_server->fd();
    handover.status_file = host.status_server->file();
  }
  if (host.health_server) {
    handover.health_fd = host.health_server->fd();
    handover.health_file = host.health_server->file();
  }
  host.options.upgrade_exec = [args = host.args, exe = own_executable(), handover,
                               start_dir = host.start_dir](int ready_fd) {
    ::setenv(kStartDirVariable, start_dir.c_str(), 1); // in the child that execs
    UpgradeHandover h = handover;
    h.ready_fd = ready_fd;
    if (!export_handover(h)) {
      PM_LOG(LogLevel::Alert, "USR2: " + sys_error("fcntl(FD_CLOEXEC off)", "listen socket"));
      return;
    }
    process_manager::Argv argv(args);
    ::execv(exe.c_str(), argv.data());
    PM_LOG(LogLevel::Alert, "USR2: " + sys_error("execv", exe));
  };
  host.options.on_upgrade = [&host](bool taken_over) {
    host.handed_over = taken_over;
    if (taken_over) {
      if (host.listener) host.listener->forget_path(); // the new master serves on it, removes it
      host.adopted_file.forget();
      if (host.status_server && !host.status_of_own_pid) host.status_server->forget_path();
      if (host.health_server) host.health_server->forget_path();
      return;
    }
    try { // the failed new master wrote its pid there, or removed the file
      if (host.pidfile) host.pidfile->reclaim();
    } catch (const std::exception& e) {
      PM_LOG(LogLevel::Error, std::string("pidfile: ") + e.what());
    }
  };
}

// TERM, QUIT, INT: the path goes first, so that nginx gets "no such file" and tries its next
// upstream rather than a reset later; then the master's copy of the socket closes, so that it
// closes for good with the last worker's copy (TCP: connections that arrive meanwhile wait in
// the queue for a draining worker, or are reset when the last one closes it).
void prepare_stop(Host& host) {
  host.options.on_stop = [&host] {
    if (host.listener) {
      host.listener->stop_listening();
    } else {
      host.adopted_file.remove_if_ours();
      ::close(host.listen_fd);
    }
    // After an upgrade the new master serves on: its ping and /readyz stay 200.
    if (host.health_server) {
      host.health_server->forget_pool_socket();
      if (!host.handed_over) host.health_server->set_stopping();
    }
    if (!host.status_server) return;
    host.status_server->forget_pool_socket();
    if (!host.handed_over) host.status_server->set_stopping();
  };
}

// The pidfile's lock comes before the socket: a start that is refused must touch nothing of the
// running host, and only the lock (not a pid that may name a zombie) says whether one runs. An
// upgrade takes the locked pidfile over from the old master (our parent).
void take_pidfile(Host& host) {
  ListenAddress status, health;
  std::string why;
  parse_listen_address(host.config.status_listen, status, why); // checked by parse_config
  parse_listen_address(host.config.health_listen, health, why);
  UpgradeHandover handover = take_handover(host.config.listen.path, status.path, health.path);
  host.adopted_status_fd = handover.status_fd;
  host.adopted_status_file = handover.status_file;
  host.adopted_health_fd = handover.health_fd;
  host.adopted_health_file = handover.health_file;
  host.upgrade_fd = handover.ready_fd;
  host.adopted_fd = handover.listen_fd;
  host.adopted_file = handover.socket_file;
  const int adopted_pidfile_fd = handover.pidfile_fd;
  const std::string& path = host.config.pidfile;
  if (!path.empty()) {
    try {
      host.pidfile = adopted_pidfile_fd >= 0
                         ? std::make_unique<process_manager::Pidfile>(path, adopted_pidfile_fd)
                         : std::make_unique<process_manager::Pidfile>(path);
    } catch (const std::exception& e) {
      throw StartFailure{exit_code::kStartupFailure,
                         std::string("pidfile: ") + e.what() + "; not starting"};
    }
    host.options.private_fds.push_back(host.pidfile->fd());
  }
}

void change_directory(const Config& config) {
  if (!config.chdir.empty() && ::chdir(config.chdir.c_str()) != 0)
    throw StartFailure{exit_code::kStartupFailure, sys_error("chdir", config.chdir)};
}

// "app hello", "app /path/libx.so", "exec /usr/bin/php-cgi", "its own handler".
std::string what_is_served(const Host& host) {
  if (host.own) return "its own handler";
  if (host.exec_mode()) {
    std::string line = "exec";
    for (const std::string& word : host.config.exec)
      line += " " + word;
    return line;
  }
  return "app " + host.config.app;
}

void log_strays(const Host& host) {
  if (host.strays.empty()) return;
  std::string fds;
  for (int fd : host.strays) {
    fds += ' '; // (not `" " + to_string()`: GCC 12 warns -Wrestrict on it in a release build)
    fds += std::to_string(fd);
  }
  PM_LOG(LogLevel::Notice, "closed " + std::to_string(host.strays.size()) +
                               " descriptor(s) inherited from the starting process, which "
                               "workers must not see:" +
                               fds);
}

// The master's loop, until it stops; then the adopted socket file is removed when ours.
int serve(Host& host) {
  log_strays(host);
  const Credentials workers_run_as = credentials(host.config); // checked: does not throw
  std::string run_as;
  if (workers_run_as.default_user)
    run_as = "; workers run as " + workers_run_as.run_as + " (started as root without --user)";
  else if (!workers_run_as.run_as.empty())
    run_as = "; workers run as " + workers_run_as.run_as;
  PM_LOG(LogLevel::Notice,
         "fcgi-host listening on " +
             (host.listener
                  ? host.listener->description()
                  : "fd " + std::to_string(host.listen_fd) + " from the previous master") +
             " with " +
             process_manager::count_text(static_cast<unsigned long>(host.config.workers), "worker",
                                         "workers") +
             (host.config.workers_from.empty() ? "" : " (" + host.config.workers_from + ")") +
             ", " + what_is_served(host) + run_as);
  // What the sandbox enforces on this kernel, once per pool (each pool's master starts here).
  PM_LOG(LogLevel::Notice, "sandbox " + sandbox_line(host.config));
  for (const std::string& risk : risky_settings(host.config))
    PM_LOG(LogLevel::Warn, risk);
  host.options.on_readable = [&host](int fd) {
    if (host.status_server && fd == host.status_server->fd()) host.status_server->serve();
    if (host.health_server && fd == host.health_server->fd()) host.health_server->serve();
    if (host.output && fd == host.output->read_fd()) host.output->drain();
    if (fd == host.pools_master_fd) leave_with_pools_master();
    on_watch_readable(host, fd);
  };
  // The master's log shows in-flight URIs (crash blocks, timeouts, slow requests) with their
  // query secrets redacted as the status page and the captures show them.
  process_manager::set_uri_redactor(
      [](char* uri, std::size_t size) { return capture::redact_uri_query(uri, size, {}); });
  process_manager::Master master(make_generation(host.config, host.app, host.plumbing()),
                                 host.options);
  host.app.copy.reset(); // the generation holds it now, and lets it go when it is retired
  if (host.health_server) host.health_server->set_scoreboard(&master.scoreboard());
  if (host.status_server) {
    host.status_server->set_scoreboard(&master.scoreboard());
    host.status_server->set_control([&master](std::string_view verb, std::string_view args) {
      return control_master(master, verb, args);
    });
  }
  int code = master.run();
  // A stop that never began (the loop failed): the socket file is still ours to remove.
  if (!host.handed_over) host.adopted_file.remove_if_ours();
  // The last worker is gone: a kept connection still in the channel was passed on and never
  // taken, and a request the web server wrote on it goes unanswered (nginx: 502). A stopping
  // worker takes what waits there, so this is a defect when it is said.
  if (!host.handed_over && host.handoff.enabled())
    if (std::size_t left = host.handoff.close_waiting(); left > 0)
      PM_LOG(LogLevel::Error, std::to_string(left) +
                                  " kept connection(s) left in the handoff channel, closed "
                                  "unanswered (a request on one is lost)");
  // After a failure the master's last line already said why and that it exits.
  PM_LOG(code == exit_code::kOk ? LogLevel::Notice : LogLevel::Debug, "fcgi-host stopped");
  return code;
}

void limit_process(const Config& config) {
  try {
    apply_process_limits(config);
  } catch (const StartupError& e) {
    throw StartFailure{exit_code::kStartupFailure, e.what()};
  }
}

// A config file with pools: this process is the master of every pool (pools/supervisor.hpp).
int run_pool_master(Host& host) {
  // A plugin is checked by its pool's master when it starts (by a child with the pool's
  // credentials), never here; --test-config has each one checked that way.
  const ApplicationCheck check = [own = host.own, own_safe = host.own_thread_safe,
                                  load = host.config.test_config,
                                  start_dir = host.start_dir](const Config& c) {
    AppSource app = resolve_app(c, own, start_dir, own_safe);
    check_before_start(c);
    credentials(c);
    if (load && !app.plugin.empty()) copy_and_check_plugin(app, c, plugin_directory(c, nullptr));
  };
  try {
    if (!host.config.test_config) close_strays(host);
    configure_log(host.config);
    log_strays(host);
    check_pools_master(host.config);
    if (host.config.test_config) {
      std::vector<PoolSpec> plans = plan_pools(host.args, host.config, check);
      PoolCgroups().check(plans);
      std::cout << "fcgi-host: configuration in " << host.config.config_file << " is valid ("
                << plans.size() << " pools:";
      for (const PoolSpec& p : plans)
        std::cout << " " << p.name;
      std::cout << ")\n";
      for (const PoolSpec& p : plans)
        std::cout << "fcgi-host: pool " << p.name << ": sandbox " << p.sandbox << "\n";
      return exit_code::kOk;
    }
    return run_pools(supervisor_spec(host.args, host.config, check, own_executable()),
                     plan_pools(host.args, host.config, check));
  } catch (const ConfigError& e) {
    std::cerr << "fcgi-host: " << e.what() << "\n";
    return exit_code::kUsage;
  } catch (const PoolSpecError& e) {
    std::cerr << "fcgi-host: " << e.what() << "\n";
    return exit_code::kUsage;
  } catch (const std::exception& e) {
    std::cerr << "fcgi-host: " << e.what() << "\n";
    return exit_code::kStartupFailure;
  }
}

// A pool's master: its lines carry the pool's name; started by the master of the pools, it
// leaves the pidfile to that master and dies with it (pools/member.hpp).
void join_pool(Host& host) {
  if (host.config.pool.empty()) return;
  process_manager::Log::get().set_tag("[" + host.config.pool + "]");
  const bool had_status = !host.config.status_listen.empty();
  host.pools_master_fd =
      join_pools_master(host.config.pool, host.config.wants_cgroup(), host.config.pidfile,
                        host.config.status_listen, host.options);
  host.status_of_own_pid = !had_status && !host.config.status_listen.empty();
}

int run_host(int argc, char** argv, app::Handler* own, bool own_thread_safe = false) {
  if (is_client_command(argc, argv)) return run_client_command(argc, argv); // status, ping
  if (is_replay_command(argc, argv)) return run_replay_command(argc, argv, own);
  hold_control_signals();
  Host host;
  host.args.assign(argv, argv + argc);
  host.own = own;
  // After USR2 the old master has changed directory (--chdir): it says where it was started.
  if (const char* dir = std::getenv(kStartDirVariable)) {
    host.start_dir = dir;
    ::unsetenv(kStartDirVariable);
  } else {
    host.start_dir = current_directory();
  }
  host.own_thread_safe = own_thread_safe;
  try {
    if (!read_config(host)) return exit_code::kOk;
    if (!host.config.pools.empty()) return run_pool_master(host);
    limit_process(host.config);
    close_strays(host);
    join_pool(host); // after close_strays: it opens a pidfd
    open_logs(host);
    take_pidfile(host);
    open_listener(host);
    open_handoff_channel(host);
    prepare_reload(host);
    watch_files(host);
    capture_worker_output(host);
    open_status_server(host);
    open_health_server(host);
    prepare_upgrade(host);
    prepare_stop(host);
    change_directory(host.config);
  } catch (const StartFailure& f) {
    std::cerr << "fcgi-host: " << f.message << "\n";
    if (f.log) PM_LOG(LogLevel::Alert, f.message);
    return f.code;
  }
  return serve(host);
}

} // namespace

int run(int argc, char** argv, app::Handler& handler) {
  return run_host(argc, argv, &handler);
}
int run_thread_safe(int argc, char** argv, app::Handler& handler) {
  return run_host(argc, argv, &handler, true);
}
int run(int argc, char** argv) {
  return run_host(argc, argv, nullptr);
}

} // namespace fcgi_host
