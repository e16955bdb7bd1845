#include "fcgi_host/runners/in_process_host.hpp"

#include "fcgi_host/net/fd_flags.hpp"
#include "fcgi_host/net/listen_socket.hpp"
#include "fcgi_host/observe/host_slot.hpp"
#include "fcgi_host/sys_error.hpp"
#include "fcgi_host/worker/worker.hpp"
#include "process_manager/scoreboard.hpp"

#include <csignal>
#include <cstdlib>
#include <fcntl.h>
#include <filesystem>
#include <pthread.h>
#include <unistd.h>

namespace fcgi_host {

InProcessHost::InProcessHost(app::Handler& handler, Limits limits, bool metrics) {
  WorkerSettings settings;
  settings.limits = limits;
  settings.observe.metrics = metrics;
  app::Handler* h = &handler;
  start(settings, [h] { return HandlerPtr(h, [](app::Handler*) {}); });
}

InProcessHost::InProcessHost(const WorkerSettings& settings, HandlerFactory make_handler) {
  start(settings, std::move(make_handler));
}

void InProcessHost::start(const WorkerSettings& given, HandlerFactory make_handler) {
  WorkerSettings settings = given;
  std::string tmpl = (std::filesystem::temp_directory_path() / "fcgi-host-test-XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw StartupError(sys_error("mkdtemp", tmpl));
  dir_ = tmpl;
  ListenOptions options;
  options.address.kind = ListenAddress::Kind::Unix;
  options.address.path = dir_ + "/host.sock";
  options.mode = 0600;
  socket_ = std::make_unique<ListenSocket>(options);
  if (!set_nonblocking(socket_->fd(), true))
    throw StartupError(sys_error("fcntl(O_NONBLOCK)", options.address.path));
  address_ = "unix:" + options.address.path;
  scoreboard_ = std::make_unique<process_manager::Scoreboard>(
      1, std::max<std::size_t>(settings.threads, 1), kHostArea);
  scoreboard_->prepare(0, 1);

  settings.listen_fd = socket_->fd();
  // The thread starts with the control signals blocked (a thread inherits its creator's mask),
  // so that a stop sent before the worker set itself up cannot kill the process.
  sigset_t control, saved;
  sigemptyset(&control);
  for (int s : {SIGTERM, SIGQUIT, SIGUSR1})
    sigaddset(&control, s);
  pthread_sigmask(SIG_BLOCK, &control, &saved);
  thread_ = std::thread([this, settings, make_handler] {
    process_manager::WorkerContext context{0, scoreboard_->slot(0), 1, *scoreboard_};
    exit_code_ = run_worker(context, settings, make_handler);
    ended_.store(true, std::memory_order_release);
  });
  pthread_sigmask(SIG_SETMASK, &saved, nullptr);
}

InProcessHost::~InProcessHost() {
  // The worker keeps SIGTERM blocked and reads it from a signalfd, which also sees signals sent
  // to its thread alone: its graceful stop, as in a worker process.
  pthread_kill(thread_.native_handle(), SIGTERM);
  thread_.join();
  socket_.reset(); // removes the socket file
  rmdir(dir_.c_str());
}

} // namespace fcgi_host
