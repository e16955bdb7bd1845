#include "fcgi_host/run.hpp"

#include "app/builtin_apps.hpp"
#include "fcgi_host/config.hpp"
#include "fcgi_host/listen_socket.hpp"
#include "fcgi_host/plugin.hpp"
#include "fcgi_host/process_setup.hpp"
#include "fcgi_host/sys_error.hpp"
#include "fcgi_host/worker.hpp"
#include "process_manager/exit_codes.hpp"
#include "process_manager/log.hpp"
#include "process_manager/master.hpp"
#include "process_manager/pidfile.hpp"

#include <fcntl.h>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace fcgi_host {
namespace {

using process_manager::LogLevel;
namespace exit_code = process_manager::exit_code;

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

process_manager::Generation make_generation(const Config& config, const AppSource& app,
                                            int listen_fd) {
  WorkerSettings settings;
  settings.listen_fd = listen_fd;
  settings.allow_clients = ClientFilter(config.allow_clients);
  settings.credentials = resolve_credentials(config);
  settings.clear_env = config.clear_env;
  settings.env = config.env;
  settings.limits = config.limits;
  settings.server_values.max_reqs = static_cast<unsigned>(config.workers);
  settings.server_values.max_conns =
      static_cast<unsigned>(config.workers * config.limits.max_connections);
  process_manager::Generation g;
  g.pool.workers = config.workers;
  g.pool.graceful_timeout = config.graceful_timeout;
  g.pool.request_timeout = config.request_timeout;
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
  log.open(config.error_log);
}

bool app_given_on(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--app" || a == "-a" || a.starts_with("--app=")) return true;
  }
  return false;
}

int run_host(int argc, char** argv, app::Handler* own) {
  Config config;
  try {
    if (parse_config(argc, argv, config, std::cout) == ParseOutcome::Exit) return exit_code::kOk;
  } catch (const ConfigError& e) {
    std::cerr << "fcgi-host: " << e.what() << "\n";
    return exit_code::kUsage;
  }
  try {
    configure_log(config);
  } catch (const std::exception& e) {
    std::cerr << "fcgi-host: error-log: " << e.what() << "\n";
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

  std::unique_ptr<ListenSocket> listener;
  try {
    listener = std::make_unique<ListenSocket>(config);
  } catch (const StartupError& e) {
    std::cerr << "fcgi-host: " << e.what() << "\n";
    if (!config.error_log.empty()) PM_LOG(LogLevel::Alert, e.what());
    return exit_code::kStartupFailure;
  }
  // Workers accept without blocking, so that one of them can wait on its kept connections and
  // the listening socket together.
  fcntl(listener->fd(), F_SETFL, fcntl(listener->fd(), F_GETFL) | O_NONBLOCK);

  const int listen_fd = listener->fd();
  const std::vector<std::string> args(argv, argv + argc);
  const ListenAddress first_address = config.listen;
  process_manager::MasterOptions options;
  options.reload = [args, listen_fd, own,
                    first_address]() -> std::optional<process_manager::Generation> {
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
      AppSource app = resolve_app(next, own, false);
      configure_log(next);
      return make_generation(next, app, listen_fd);
    } catch (const std::exception& e) {
      PM_LOG(LogLevel::Error,
             std::string("reload refused, the running configuration stays: ") + e.what());
      return std::nullopt;
    }
  };
  options.reopen_logs = [] { process_manager::Log::get().reopen(); };

  std::unique_ptr<process_manager::Pidfile> pidfile;
  try {
    if (!config.pidfile.empty())
      pidfile = std::make_unique<process_manager::Pidfile>(config.pidfile);
  } catch (const std::exception& e) {
    std::cerr << "fcgi-host: pidfile: " << e.what() << "\n";
    return exit_code::kStartupFailure;
  }
  if (!config.chdir.empty() && ::chdir(config.chdir.c_str()) != 0) {
    std::cerr << "fcgi-host: " << sys_error("chdir", config.chdir) << "\n";
    return exit_code::kStartupFailure;
  }

  PM_LOG(LogLevel::Notice, "fcgi-host listening on " + listener->description() + " with " +
                               std::to_string(config.workers) + " workers, app " +
                               (own ? std::string("(own handler)") : config.app));
  process_manager::Master master(make_generation(config, app, listen_fd), options);
  int code = master.run();
  PM_LOG(LogLevel::Notice, "fcgi-host stopped");
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
