#pragma once
// The mold's boot (--mold on; process_manager/mold.hpp), in the mold process: for a plugin, the
// file copied first into a sealed memory file by a child that dropped to the workers' user (the
// root master never opens the plugin's path; the copy is made before the mold joins the pool's
// private /tmp, so a plugin under the machine's /tmp is still seen); then what a worker does
// before its handler starts (the pool's /tmp, its user, its environment, its output captured),
// so that the mold is what a worker is; then the plugin loaded from the sealed copy and its mold
// hook run (PluginLoader). The workers forked from the mold go on from there (run_worker with
// WorkerContext::from_mold): the sandbox closes in each of them around its handler, as without a
// mold. The sealed copy is kept by the master for the generation: a mold that replaces a dead
// one loads the same code, whatever the file is now.
#include "fcgi_host/runners/plugin.hpp"
#include "fcgi_host/sandbox/sandbox_settings.hpp"
#include "fcgi_host/worker/process_setup.hpp"
#include "process_manager/mold.hpp"

#include <memory>
#include <string>
#include <sys/types.h>
#include <vector>

namespace fcgi_host {

struct MoldSetup {
  Credentials credentials;
  bool clear_env = false;
  std::vector<std::string> env;
  SandboxSettings sandbox; // its private /tmp joined, its capabilities dropped
  int output_fd = -1;      // OutputCapture's write end, -1: none
  std::string plugin;      // the operator's file; empty: not a plugin (nothing to load)
  uid_t master_uid = 0;    // whom the plugin file must belong to (or root), as the master's
  gid_t master_gid = 0;    // copy checks it (runners/plugin_copy.hpp)
};

// Runs in the mold. `kept_fd`: the generation's sealed copy from an earlier mold, or -1.
process_manager::MoldBoot boot_mold(const MoldSetup& setup,
                                    const std::shared_ptr<PluginLoader>& loader, int kept_fd);

} // namespace fcgi_host
