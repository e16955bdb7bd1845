#include "fcgi_host/runners/mold_boot.hpp"

#include "fcgi_host/runners/plugin_copy.hpp"
#include "fcgi_host/sandbox/sandbox.hpp"
#include "fcgi_host/sys_error.hpp"
#include "fcgi_host/worker/output_capture.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fcgi_host {

namespace {

// The plugin's bytes in a sealed memory file: read with the mold's rights, without blocking
// (a FIFO is refused by its fstat, never waited on), checked before a byte is read as the
// master's copy checks it. Its descriptor, or -1 with `why`.
int sealed_copy(const MoldSetup& setup, std::string& why) {
  const std::string& source = setup.plugin;
  const int from = ::open(source.c_str(), O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
  if (from < 0) return why = sys_error("open", source), -1;
  struct stat st {};
  if (::fstat(from, &st) != 0) {
    why = sys_error("fstat", source);
    ::close(from);
    return -1;
  }
  // The mold reads with its own rights: what its user may read is all it can show itself.
  why = unsafe_plugin_source(st, static_cast<uid_t>(-1), static_cast<gid_t>(-1), setup.master_uid,
                             setup.master_gid);
  if (!why.empty()) {
    why = "plugin \"" + source + "\" refused: " + why;
    ::close(from);
    return -1;
  }
  const int copy = ::memfd_create("fcgi-host-plugin", MFD_CLOEXEC | MFD_ALLOW_SEALING);
  bool ok = copy >= 0 && copy_plugin_bytes(from, copy, source, "the mold's copy", why);
  if (copy < 0) why = sys_error("memfd_create", source);
  ::close(from);
  if (ok &&
      ::fcntl(copy, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_WRITE | F_SEAL_SEAL) != 0)
    ok = false, why = sys_error("fcntl(F_ADD_SEALS)", "the mold's copy of " + source);
  if (!ok && copy >= 0) ::close(copy);
  return ok ? copy : -1;
}

} // namespace

process_manager::MoldBoot boot_mold(const MoldSetup& setup,
                                    const std::shared_ptr<PluginLoader>& loader, int kept_fd) {
  process_manager::MoldBoot boot;
  OutputCapture::attach(setup.output_fd);
  if (std::string why = prepare_sandbox(setup.sandbox); !why.empty())
    return boot.error = "sandbox: " + why, boot;
  if (!drop_privileges(setup.credentials))
    return boot.error = std::string("could not drop privileges: ") + std::strerror(errno), boot;
  apply_environment(setup.clear_env, setup.env);
  if (!loader) return boot; // a built-in app or the program's own handler: nothing to load
  boot.keep_fd =
      kept_fd >= 0 ? ::fcntl(kept_fd, F_DUPFD_CLOEXEC, 3) : sealed_copy(setup, boot.error);
  if (boot.keep_fd < 0) {
    if (boot.error.empty())
      boot.error = sys_error("fcntl(F_DUPFD)", "the generation's plugin copy");
    return boot;
  }
  loader->set_file("/proc/self/fd/" + std::to_string(boot.keep_fd));
  loader->load(); // throws StartupError naming the plugin: the mold's boot failure
  return boot;
}

} // namespace fcgi_host
