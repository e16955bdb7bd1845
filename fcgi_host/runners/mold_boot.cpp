#include "fcgi_host/runners/mold_boot.hpp"

#include "fcgi_host/runners/plugin_copy.hpp"
#include "fcgi_host/sandbox/sandbox.hpp"
#include "fcgi_host/sys_error.hpp"
#include "fcgi_host/worker/output_capture.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fcgi_host {

namespace {

// Copies the plugin into `copy`: opened without blocking (a FIFO is refused by its fstat,
// never waited on) and checked before a byte is read, as the master's copy checks it. "" or why.
std::string copy_plugin_into(const MoldSetup& setup, int copy) {
  const std::string& source = setup.plugin;
  const int from = ::open(source.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (from < 0) return sys_error("open", source);
  struct stat st {};
  std::string why = ::fstat(from, &st) != 0
                        ? sys_error("fstat", source)
                        : unsafe_plugin_source(st, static_cast<uid_t>(-1), static_cast<gid_t>(-1),
                                               setup.master_uid, setup.master_gid);
  if (!why.empty() && why.find("fstat") == std::string::npos)
    why = "plugin \"" + source + "\" refused: " + why;
  if (why.empty()) copy_plugin_bytes(from, copy, source, "the mold's copy", why);
  ::close(from);
  return why;
}

// What the copying child says, and how it ended: "" when it copied the file.
std::string copier_verdict(int report, pid_t pid) {
  std::string said;
  char buffer[512];
  for (ssize_t n; (n = ::read(report, buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    said.append(buffer, static_cast<std::size_t>(n));
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {}
  if (said.empty() && !(WIFEXITED(status) && WEXITSTATUS(status) == 0))
    said = "the process copying the plugin died (status " + std::to_string(status) + ")";
  return said;
}

// The plugin's bytes in a sealed memory file, read by a child that dropped to the workers'
// user first: the file is read with their rights alone (a link to a root-only file is refused
// by the kernel), and before the mold joins the pool's private /tmp (where a plugin under the
// machine's /tmp would not be seen). Its descriptor, or -1 with `why`.
int sealed_copy(const MoldSetup& setup, std::string& why) {
  const int copy = ::memfd_create("fcgi-host-plugin", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  int report[2];
  if (copy < 0 || ::pipe2(report, O_CLOEXEC) != 0) {
    why = sys_error(copy < 0 ? "memfd_create" : "pipe2", "the mold's copy of " + setup.plugin);
    if (copy >= 0) ::close(copy);
    return -1;
  }
  const pid_t pid = ::fork(); // the mold is one thread, its signals blocked
  if (pid == 0) {
    ::close(report[0]);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL); // the mold's boot timed out: the master killed it
    std::string said =
        drop_privileges(setup.credentials)
            ? copy_plugin_into(setup, copy)
            : std::string("could not drop privileges to read the plugin: ") + std::strerror(errno);
    ssize_t ignored = ::write(report[1], said.data(), said.size());
    (void)ignored;
    _exit(said.empty() ? 0 : 1);
  }
  ::close(report[1]);
  why = pid < 0 ? sys_error("fork", "the mold's copy of " + setup.plugin)
                : copier_verdict(report[0], pid);
  ::close(report[0]);
  if (why.empty() &&
      ::fcntl(copy, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0)
    why = sys_error("fcntl(F_ADD_SEALS)", "the mold's copy of " + setup.plugin);
  if (!why.empty()) {
    ::close(copy);
    return -1;
  }
  return copy;
}

} // namespace

process_manager::MoldBoot boot_mold(const MoldSetup& setup,
                                    const std::shared_ptr<PluginLoader>& loader, int kept_fd) {
  process_manager::MoldBoot boot;
  OutputCapture::attach(setup.output_fd);
  if (loader) { // a built-in app or the program's own handler: nothing to copy or load
    boot.keep_fd =
        kept_fd >= 0 ? ::fcntl(kept_fd, F_DUPFD_CLOEXEC, 3) : sealed_copy(setup, boot.error);
    if (boot.keep_fd < 0) {
      if (boot.error.empty())
        boot.error = sys_error("fcntl(F_DUPFD)", "the generation's plugin copy");
      return boot;
    }
  }
  if (std::string why = prepare_sandbox(setup.sandbox); !why.empty())
    return boot.error = "sandbox: " + why, boot;
  if (!drop_privileges(setup.credentials))
    return boot.error = std::string("could not drop privileges: ") + std::strerror(errno), boot;
  apply_environment(setup.clear_env, setup.env);
  if (!loader) return boot;
  loader->set_file("/proc/self/fd/" + std::to_string(boot.keep_fd));
  loader->load(); // throws StartupError naming the plugin: the mold's boot failure
  return boot;
}

} // namespace fcgi_host
