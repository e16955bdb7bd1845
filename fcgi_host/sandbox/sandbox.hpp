#pragma once
// A worker's sandbox (--sandbox): the order in which its layers are applied, and what happens
// when the kernel lacks one (docs/security.md, "Sandbox").
//
//  1. prepare_sandbox, right after the fork, while the worker may still be root: it joins the
//     pool's private /tmp (setns) and drops every capability from the bounding set.
//  2. The privilege drop (--user), the environment, the handler made, on_worker_start: the
//     handler starts outside the sandbox (its plugin and libraries are loaded, its database
//     connections opened, its configuration read).
//  3. enter_sandbox, before the ready check and the first request: capabilities cleared,
//     no_new_privs, Landlock (the files it has mapped now, the lists), the seccomp filter.
//
// Fail closed: with SandboxMode::On a layer the kernel refuses stops the worker (a boot
// failure); with BestEffort the worker goes on with what applied and says once what did not.
#include "fcgi_host/sandbox/sandbox_settings.hpp"

#include <string>
#include <vector>

namespace fcgi_host {

// Step 1. "" when done, else why (the worker does not start).
std::string prepare_sandbox(const SandboxSettings& settings);

struct SandboxResult {
  std::string error;   // a layer failed and the mode is On: the worker must not serve
  std::string skipped; // BestEffort: what could not be applied ("" if everything was)
};

// Step 3. `programs`: an --exec program about to be exec'd (read and execute; the filter then
// keeps execve).
SandboxResult enter_sandbox(const SandboxSettings& settings,
                            const std::vector<std::string>& programs = {});

// What this kernel cannot apply of `settings` ("" if nothing): checked at start and by
// --test-config, refused there unless best-effort.
std::string sandbox_unsupported(const SandboxSettings& settings);

// One line for the status page and --test-config: "off", or the layers ("on: landlock ABI 7,
// seccomp deny-list (exec refused), no_new_privs, capabilities dropped, private /tmp; read 2,
// write 1 paths").
std::string describe_sandbox(const SandboxSettings& settings);

} // namespace fcgi_host
