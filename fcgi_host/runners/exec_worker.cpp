#include "fcgi_host/runners/exec_worker.hpp"

#include "fcgi_host/net/fd_flags.hpp"
#include "fcgi_host/runners/script_relay.hpp"
#include "fcgi_host/sandbox/sandbox.hpp"
#include "fcgi_host/sys_error.hpp"
#include "process_manager/argv.hpp"
#include "process_manager/exit_codes.hpp"
#include "process_manager/log.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <linux/close_range.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace fcgi_host {

using process_manager::LogLevel;
namespace exit_code = process_manager::exit_code;

namespace {

// The program's file as execvp would find it (a name on $PATH, or a path), for the sandbox's
// read-and-execute rule; "" if not found.
std::string program_path(const std::string& program) {
  if (program.find('/') != std::string::npos) return program;
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (std::size_t start = 0; start <= dirs.size();) {
    std::size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string candidate = dirs.substr(start, end - start) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return {};
}

} // namespace

int run_exec_worker(const process_manager::WorkerContext& context, const ExecSettings& settings) {
  if (std::string why = prepare_sandbox(settings.sandbox); !why.empty())
    return process_manager::boot_failure(context, "--exec: sandbox: " + why);
  if (!drop_privileges(settings.credentials))
    return process_manager::boot_failure(
        context, std::string("--exec: could not drop privileges: ") + std::strerror(errno));
  apply_environment(settings.clear_env, settings.env);
  // The program is no systemd service of its own.
  unsetenv("NOTIFY_SOCKET");
  unsetenv("WATCHDOG_USEC");
  unsetenv("WATCHDOG_PID");

  if (settings.script.enabled()) return run_script_relay(context, settings);
  return exec_program(context, settings, settings.listen_fd);
}

int exec_program(const process_manager::WorkerContext& context, const ExecSettings& settings,
                 int listen_fd) {
  int log_fd = process_manager::Log::get().fd();
  if (::dup2(listen_fd, 0) != 0 || (log_fd != 1 && ::dup2(log_fd, 1) != 1) ||
      (log_fd != 2 && ::dup2(log_fd, 2) != 2)) {
    return process_manager::boot_failure(context, "--exec: " + sys_error("dup2", "fd 0, 1, 2"));
  }
  // The master keeps the socket blocking in exec mode (O_NONBLOCK belongs to the open file, which
  // every worker shares); make sure, since a non-blocking accept() makes libfcgi spin or fail.
  if (!set_nonblocking(0, false) || ::fcntl(0, F_SETFD, 0) != 0) {
    PM_LOG(LogLevel::Alert, "--exec: " + sys_error("fcntl", "listen socket on fd 0"));
    return exit_code::kWorkerBootFailure;
  }

  // The slot stays Starting: an exec'd program cannot report its own state, so the master
  // takes it as ready once it has lived the boot window (kExecBootWindow, worker_exit.hpp).

  process_manager::Argv argv(settings.argv);
  // Every other fd closes at exec: the program gets 0, 1 and 2 only, and if exec fails the log
  // is still open for the line below.
  ::syscall(SYS_close_range, 3u, ~0u, CLOSE_RANGE_CLOEXEC);
  if (settings.sandbox.enabled()) {
    std::vector<std::string> programs;
    if (std::string p = program_path(settings.argv[0]); !p.empty()) programs.push_back(p);
    SandboxResult sandbox = enter_sandbox(settings.sandbox, programs);
    if (!sandbox.error.empty())
      return process_manager::boot_failure(context, "--exec: sandbox: " + sandbox.error);
    if (!sandbox.skipped.empty() && context.slot_index == 0)
      PM_LOG(LogLevel::Warn, "sandbox best-effort, not applied: " + sandbox.skipped);
  }
  ::execvp(argv.data()[0], argv.data());
  int err = errno;
  return process_manager::boot_failure(context,
                                       "--exec: " + sys_error("execvp", settings.argv[0], err));
}

} // namespace fcgi_host
