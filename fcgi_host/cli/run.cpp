#include "fcgi_host/run.hpp"

#include "app/builtin_apps.hpp"
#include "fcgi_host/cli/client_commands.hpp"
#include "fcgi_host/cli/config.hpp"
#include "fcgi_host/net/fd_flags.hpp"
#include "fcgi_host/net/listen_socket.hpp"
#include "fcgi_host/observe/access_log.hpp"
#include "fcgi_host/observe/status_server.hpp"
#include "fcgi_host/runners/exec_worker.hpp"
#include "fcgi_host/runners/plugin.hpp"
#include "fcgi_host/sys_error.hpp"
#include "fcgi_host/worker/output_capture.hpp"
#include "fcgi_host/worker/process_setup.hpp"
#include "fcgi_host/worker/worker.hpp"
#include "process_manager/exit_codes.hpp"
#include "process_manager/inherited_fds.hpp"
#include "process_manager/log.hpp"
#include "process_manager/master.hpp"
#include "process_manager/pidfile.hpp"

#include <climits>
#include <csignal>
#include <cstdlib>
#include <fcntl.h>
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

// Binary upgrade (USR2): the old master execs the new binary with these two fds left open.
constexpr const char* kListenFdEnv = "FCGI_HOST_LISTEN_FD";   // take this socket, do not bind
constexpr const char* kUpgradeFdEnv = "FCGI_HOST_UPGRADE_FD"; // write one byte here when ready
// ... and the handoff channel's two ends, so that the old generation's kept connections move to
// the new master's workers.
constexpr const char* kHandoffSendFdEnv = "FCGI_HOST_HANDOFF_SEND_FD";
constexpr const char* kHandoffRecvFdEnv = "FCGI_HOST_HANDOFF_RECV_FD";
// ... and the locked pidfile, taken over, and the DEV:INODE of the socket file.
constexpr const char* kPidfileFdEnv = "FCGI_HOST_PIDFILE_FD";
constexpr const char* kSocketFileEnv = "FCGI_HOST_SOCKET_FILE";

// An fd number from the environment (removed from it, so that workers and a later upgrade do not
// see a stale one); -1 when absent or not a number.
int take_fd_from_env(const char* name) {
  const char* v = std::getenv(name);
  int fd = -1;
  if (v && *v) {
    char* end = nullptr;
    long n = std::strtol(v, &end, 10);
    if (*end == '\0' && n >= 0 && n < INT_MAX && ::fcntl(static_cast<int>(n), F_GETFD) != -1)
      fd = static_cast<int>(n);
  }
  unsetenv(name);
  if (fd >= 0) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
  return fd;
}

// What the master was handed on purpose, beside 0, 1 and 2: systemd's sockets, and an old
// master's socket, ready pipe and pidfile at a binary upgrade. Everything else it inherited is
// a stray and is closed (process_manager/inherited_fds.hpp).
std::vector<int> inherited_fds_to_keep() {
  std::vector<int> keep;
  for (const char* name :
       {kListenFdEnv, kUpgradeFdEnv, kHandoffSendFdEnv, kHandoffRecvFdEnv, kPidfileFdEnv})
    if (const char* v = std::getenv(name)) keep.push_back(std::atoi(v));
  const char* pid = std::getenv("LISTEN_PID");
  const char* n = std::getenv("LISTEN_FDS");
  if (pid && n && std::atoi(pid) == getpid())
    for (int i = 0; i < std::atoi(n) && i < 1024; ++i)
      keep.push_back(3 + i); // SD_LISTEN_FDS_START
  return keep;
}

// The path to exec on USR2: the file at the path we were started from, which a package upgrade
// has replaced (/proc/self/exe itself would name the old, deleted inode).
std::string own_executable() {
  char buf[PATH_MAX];
  ssize_t n = ::readlink("/proc/self/exe", buf, sizeof buf - 1);
  if (n <= 0) return "/proc/self/exe";
  std::string path(buf, static_cast<std::size_t>(n));
  if (path.ends_with(" (deleted)")) path.resize(path.size() - 10);
  return path;
}

process_manager::PoolMode pool_mode(const std::string& pm) {
  if (pm == "dynamic") return process_manager::PoolMode::Dynamic;
  if (pm == "ondemand") return process_manager::PoolMode::OnDemand;
  return process_manager::PoolMode::Static;
}

// What --app resolved to: a built-in app, a loaded plugin, or the program's own handler.
struct AppSource {
  app::Handler* own = nullptr;
  std::shared_ptr<Plugin> plugin;
  std::string builtin;

  HandlerFactory factory() const {
    if (own) {
      app::Handler* h = own;
      return [h] { return HandlerPtr(h, [](app::Handler*) {}); };
    }
    if (plugin) {
      std::shared_ptr<Plugin> p = plugin;
      return [p] { return p->create(); };
    }
    std::string name = builtin;
    return [name] {
      return HandlerPtr(app::make_builtin_app(name).release(), [](app::Handler* h) { delete h; });
    };
  }
};

bool looks_like_path(const std::string& app) {
  return app.find('/') != std::string::npos || app.ends_with(".so");
}

// Throws StartupError for an app that cannot be served.
AppSource resolve_app(const Config& config, app::Handler* own, bool app_given) {
  AppSource source;
  if (own) {
    if (app_given) throw StartupError("--app: this program serves its own handler");
    source.own = own;
  } else if (looks_like_path(config.app)) {
    source.plugin = std::make_shared<Plugin>(config.app);
  } else if (app::is_builtin_app(config.app)) {
    source.builtin = config.app;
  } else {
    throw StartupError("--app: unknown app \"" + config.app +
                       "\" (built-ins: hello, echo; or the path of a plugin .so)");
  }
  return source;
}

// The write end of the OutputCapture, for the workers of every generation (-1: none).
int worker_output_fd = -1;
// Kept connections move between the workers of every generation through it (handoff.hpp).
HandoffChannel worker_handoff;

process_manager::Generation make_generation(const Config& config, const AppSource& app,
                                            int listen_fd) {
  WorkerSettings settings;
  settings.listen_fd = listen_fd;
  settings.allow_clients = ClientFilter(config.allow_clients);
  settings.credentials = resolve_credentials(config);
  settings.clear_env = config.clear_env;
  settings.env = config.env;
  settings.limits = config.limits;
  settings.max_requests = config.max_requests;
  settings.max_requests_jitter = config.max_requests_jitter;
  settings.max_rss_kib = static_cast<long>(config.max_rss_mib) * 1024;
  settings.observe = observability_settings(config);
  settings.output_fd = worker_output_fd;
  settings.handoff = worker_handoff;
  settings.server_values.max_reqs = static_cast<unsigned>(config.workers);
  settings.server_values.max_conns =
      static_cast<unsigned>(config.workers * config.limits.max_connections);
  process_manager::Generation g;
  g.pool.workers = config.workers;
  g.pool.graceful_timeout = config.graceful_timeout;
  g.pool.request_timeout = config.request_timeout;
  g.pool.mode = pool_mode(config.pm);
  g.pool.min_spare = config.min_spare;
  g.pool.max_spare = config.max_spare;
  g.pool.max_workers = config.max_workers;
  g.pool.idle_timeout = config.idle_timeout;
  if (!config.exec.empty()) {
    ExecSettings exec{listen_fd, config.exec, settings.credentials, config.clear_env, config.env};
    g.pool.retire_signal = SIGTERM; // libfcgi: finish the request, then exit; QUIT would kill
    g.pool.reopen_logs_signal = 0;  // libfcgi: USR1 means stop
    g.pool.resend_stop_every = std::chrono::milliseconds{500};
    g.worker_main = [exec](const process_manager::WorkerContext& context) {
      return run_exec_worker(context, exec);
    };
    return g;
  }
  if (worker_handoff.enabled()) g.pool.nudge_after = config.limits.handoff_after;
  HandlerFactory factory = app.factory();
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

bool app_given_on(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--app" || a == "-a" || a.starts_with("--app=")) return true;
  }
  return false;
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

int run_host(int argc, char** argv, app::Handler* own) {
  if (is_client_command(argc, argv)) return run_client_command(argc, argv); // status, ping
  hold_control_signals();
  Config config;
  try {
    if (parse_config(argc, argv, config, std::cout) == ParseOutcome::Exit) return exit_code::kOk;
  } catch (const ConfigError& e) {
    std::cerr << "fcgi-host: " << e.what() << "\n";
    return exit_code::kUsage;
  }
  // Before the log or anything else of ours is open: whatever is open now was inherited.
  const std::vector<int> strays = process_manager::close_inherited_fds(inherited_fds_to_keep());
  try {
    configure_log(config);
  } catch (const std::exception& e) {
    std::cerr << "fcgi-host: " << e.what() << "\n";
    return exit_code::kStartupFailure;
  }
  AppSource app;
  try {
    app = resolve_app(config, own, own && app_given_on(argc, argv));
    resolve_credentials(config);
  } catch (const StartupError& e) {
    std::cerr << "fcgi-host: " << e.what() << "\n";
    return exit_code::kStartupFailure;
  }
  if (config.test_config) {
    std::cout << "fcgi-host: configuration"
              << (config.config_file.empty() ? "" : " in " + config.config_file) << " is valid\n";
    return exit_code::kOk;
  }

  // Started by USR2 of an old master: its socket, already bound and listening.
  const int upgrade_fd = take_fd_from_env(kUpgradeFdEnv);
  const int adopted_fd = take_fd_from_env(kListenFdEnv);
  const int adopted_pidfile_fd = take_fd_from_env(kPidfileFdEnv);
  // The pidfile's lock first: a start that is refused must touch nothing of the running host,
  // and only the lock (not a pid that may name a zombie) says whether one runs.
  std::unique_ptr<process_manager::Pidfile> pidfile;
  try {
    // An upgrade takes the locked pidfile over from the old master (our parent); the old one
    // leaves it alone on exit, since it no longer holds its pid.
    if (!config.pidfile.empty())
      pidfile = adopted_pidfile_fd >= 0
                    ? std::make_unique<process_manager::Pidfile>(config.pidfile, adopted_pidfile_fd)
                    : std::make_unique<process_manager::Pidfile>(config.pidfile);
  } catch (const std::exception& e) {
    std::cerr << "fcgi-host: pidfile: " << e.what() << "; not starting\n";
    return exit_code::kStartupFailure;
  }
  // The socket file an upgrade hands over: removed on stop only while it is still that file.
  SocketFile adopted_file;
  if (const char* text = std::getenv(kSocketFileEnv); text && adopted_fd >= 0)
    adopted_file = SocketFile::from_text(config.listen.path, text);
  unsetenv(kSocketFileEnv);
  std::unique_ptr<ListenSocket> listener;
  try {
    if (adopted_fd < 0) listener = std::make_unique<ListenSocket>(config);
  } catch (const StartupError& e) {
    std::cerr << "fcgi-host: " << e.what() << "\n";
    if (!config.error_log.empty()) PM_LOG(LogLevel::Alert, e.what());
    return exit_code::kStartupFailure;
  }
  const int listen_fd = listener ? listener->fd() : adopted_fd;
  const bool exec_mode = !config.exec.empty();
  // Workers accept without blocking, so that one of them can wait on its kept connections and
  // the listening socket together. O_NONBLOCK belongs to the open socket, shared by every
  // process: in exec mode it stays blocking, as libfcgi programs expect.
  if (!set_nonblocking(listen_fd, !exec_mode)) {
    std::cerr << "fcgi-host: " << sys_error("fcntl(O_NONBLOCK)", "listen socket") << "\n";
    return exit_code::kStartupFailure;
  }
  if (!exec_mode && config.limits.handoff_after.count() > 0) {
    worker_handoff.send_fd = take_fd_from_env(kHandoffSendFdEnv);
    worker_handoff.recv_fd = take_fd_from_env(kHandoffRecvFdEnv);
    if (!worker_handoff.enabled()) {
      try {
        worker_handoff = make_handoff_channel();
      } catch (const StartupError& e) {
        std::cerr << "fcgi-host: " << e.what() << "\n";
        return exit_code::kStartupFailure;
      }
    }
  }
  bool handed_over = false; // USR2 succeeded: the socket file now belongs to the new master
  const std::vector<std::string> args(argv, argv + argc);
  const ListenAddress first_address = config.listen;
  process_manager::MasterOptions options;
  options.reload = [args, listen_fd, own, first_address,
                    exec_mode]() -> std::optional<process_manager::Generation> {
    std::vector<const char*> argv2;
    for (const auto& a : args)
      argv2.push_back(a.c_str());
    Config next;
    try {
      std::ostringstream ignored;
      parse_config(static_cast<int>(argv2.size()), argv2.data(), next, ignored);
      if (next.listen.to_string() != first_address.to_string())
        PM_LOG(LogLevel::Warn, "reload: listen cannot change without a restart; keeping " +
                                   first_address.to_string());
      if (next.exec.empty() == exec_mode)
        throw StartupError("--exec cannot be added or removed without a restart (the socket "
                           "is blocking for exec'd programs, non-blocking for built-in workers)");
      AppSource app = resolve_app(next, own, false);
      configure_log(next);
      return make_generation(next, app, listen_fd);
    } catch (const std::exception& e) {
      PM_LOG(LogLevel::Error,
             std::string("reload refused, the running configuration stays: ") + e.what());
      return std::nullopt;
    }
  };
  options.reopen_logs = [] {
    process_manager::Log::get().reopen();
    AccessLog::get().reopen();
  };
  // Workers' stdout and stderr go to the log, prefixed with their pid.
  std::unique_ptr<OutputCapture> output;
  try {
    output = std::make_unique<OutputCapture>();
    worker_output_fd = output->write_fd();
    options.watch_fds.push_back(output->read_fd());
  } catch (const std::exception& e) {
    PM_LOG(LogLevel::Error, std::string(e.what()) + "; worker output is not captured");
  }
  // --status-listen: the master answers status and ping itself. After USR2 the old master
  // still holds the address until it exits: the new one then goes without (logged).
  std::unique_ptr<StatusServer> status_server;
  if (!config.status_listen.empty()) {
    try {
      status_server =
          std::make_unique<StatusServer>(config, observability_settings(config), listen_fd);
      options.watch_fds.push_back(status_server->fd());
    } catch (const StartupError& e) {
      if (upgrade_fd < 0) {
        std::cerr << "fcgi-host: status-listen: " << e.what() << "\n";
        return exit_code::kStartupFailure;
      }
      PM_LOG(LogLevel::Error, std::string("status-listen: ") + e.what() + "; serving without it");
    }
  }
  options.listen_fd = listen_fd;
  options.ready_fd = upgrade_fd;
  if (pidfile) options.private_fds.push_back(pidfile->fd());
  const SocketFile socket_file = listener ? listener->file() : adopted_file;
  options.upgrade_exec = [args, listen_fd, exe = own_executable(), socket_file,
                          pidfile_fd = pidfile ? pidfile->fd() : -1](int ready_fd) {
    // The socket, the handoff channel and the pidfile's lock cross exec, nothing else.
    if (::fcntl(listen_fd, F_SETFD, 0) != 0) {
      PM_LOG(LogLevel::Alert, "USR2: " + sys_error("fcntl(FD_CLOEXEC off)", "listen socket"));
      return;
    }
    setenv(kListenFdEnv, std::to_string(listen_fd).c_str(), 1);
    setenv(kUpgradeFdEnv, std::to_string(ready_fd).c_str(), 1);
    if (!socket_file.empty()) setenv(kSocketFileEnv, socket_file.to_text().c_str(), 1);
    for (auto [fd, env] : {std::pair{worker_handoff.send_fd, kHandoffSendFdEnv},
                           std::pair{worker_handoff.recv_fd, kHandoffRecvFdEnv},
                           std::pair{pidfile_fd, kPidfileFdEnv}})
      if (fd >= 0 && ::fcntl(fd, F_SETFD, 0) == 0) // else the new master makes its own
        setenv(env, std::to_string(fd).c_str(), 1);
    std::vector<char*> argv2;
    for (const auto& a : args)
      argv2.push_back(const_cast<char*>(a.c_str()));
    argv2.push_back(nullptr);
    ::execv(exe.c_str(), argv2.data());
    PM_LOG(LogLevel::Alert, "USR2: " + sys_error("execv", exe));
  };
  if (!config.chdir.empty() && ::chdir(config.chdir.c_str()) != 0) {
    std::cerr << "fcgi-host: " << sys_error("chdir", config.chdir) << "\n";
    return exit_code::kStartupFailure;
  }

  options.on_upgrade = [&](bool taken_over) {
    handed_over = taken_over;
    if (taken_over) {
      if (listener) listener->forget_path(); // the new master serves on it and removes it
      adopted_file.forget();
      return;
    }
    try { // the failed new master wrote its pid there, or removed the file
      if (pidfile) pidfile->reclaim();
    } catch (const std::exception& e) {
      PM_LOG(LogLevel::Error, std::string("pidfile: ") + e.what());
    }
  };
  // TERM, QUIT, INT: the path goes first, so that nginx gets "no such file" and tries its next
  // upstream rather than a reset later; then the master's copy of the socket closes, so that
  // it closes for good with the last worker's copy (TCP: connections that arrive meanwhile wait
  // in the queue for a draining worker, or are reset when the last one closes it).
  options.on_stop = [&] {
    if (listener) {
      listener->stop_listening();
    } else {
      adopted_file.remove_if_ours();
      ::close(listen_fd);
    }
    if (status_server) status_server->forget_pool_socket();
  };

  if (!strays.empty()) {
    std::string fds;
    for (int fd : strays)
      fds += " " + std::to_string(fd);
    PM_LOG(LogLevel::Notice, "closed " + std::to_string(strays.size()) +
                                 " descriptor(s) inherited from the starting process, which "
                                 "workers must not see:" +
                                 fds);
  }
  const Credentials credentials = resolve_credentials(config); // checked above: does not throw
  std::string run_as;
  if (credentials.default_user)
    run_as = "; workers run as " + credentials.run_as + " (started as root without --user)";
  else if (!credentials.run_as.empty())
    run_as = "; workers run as " + credentials.run_as;
  PM_LOG(LogLevel::Notice,
         "fcgi-host listening on " +
             (listener ? listener->description()
                       : "fd " + std::to_string(listen_fd) + " from the previous master") +
             " with " + std::to_string(config.workers) + " workers, app " +
             (own ? std::string("(own handler)") : config.app) + run_as);
  options.on_readable = [&status_server, &output](int fd) {
    if (status_server && fd == status_server->fd()) status_server->serve();
    if (output && fd == output->read_fd()) output->drain();
  };
  process_manager::Master master(make_generation(config, app, listen_fd), options);
  if (status_server) status_server->set_scoreboard(&master.scoreboard());
  int code = master.run();
  // A stop that never began (the loop failed): the socket file is still ours to remove.
  if (!handed_over) adopted_file.remove_if_ours();
  // After a failure the master's last line already said why and that it exits.
  PM_LOG(code == exit_code::kOk ? LogLevel::Notice : LogLevel::Debug, "fcgi-host stopped");
  return code;
}

} // namespace

int run(int argc, char** argv, app::Handler& handler) {
  return run_host(argc, argv, &handler);
}
int run(int argc, char** argv) {
  return run_host(argc, argv, nullptr);
}

} // namespace fcgi_host
