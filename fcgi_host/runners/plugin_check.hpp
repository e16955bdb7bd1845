#pragma once
// Whether a plugin file loads, asked of a child process that first drops to the workers'
// credentials: at start, in --test-config and at every reload, the plugin's code (its
// constructors, its table) runs there and never in the master, which is usually root.
#include "fcgi_host/worker/process_setup.hpp"

#include <string>
#include <vector>

namespace fcgi_host {

struct PluginCheck {
  std::string file;     // what to load (a private copy)
  std::string shown_as; // the operator's path, for the message
  Credentials credentials;
  bool clear_env = false;
  std::vector<std::string> env;
};

// Forks, drops privileges, applies the environment, loads the file and checks its table, and
// says so over a pipe. Returns "" when it loads, else why (naming shown_as): what dlopen() or the
// ABI check said, or how the child died. Waits at most kPluginCheckTimeoutMs.
std::string check_plugin(const PluginCheck& check);

// The master waits for it (its loop stands still meanwhile): loading a library takes milliseconds.
inline constexpr int kPluginCheckTimeoutMs = 10000;

} // namespace fcgi_host
