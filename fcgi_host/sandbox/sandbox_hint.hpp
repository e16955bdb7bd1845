#pragma once
// What a worker's boot-failure line adds when the worker booted inside a sandbox or with a
// private /tmp: a handler's file that cannot be opened there fails as missing or forbidden
// ("unable to open database file"), with no word of the sandbox. The master appends this to the
// line (process_manager::Generation::explain_boot_failure), naming the sandbox, the path the
// failure names when it is outside the lists, and the option that opens it.
#include "fcgi_host/sandbox/sandbox_settings.hpp"

#include <string>

namespace fcgi_host {

// "" when neither --sandbox nor --private-tmp is on; else the hint, starting with "; ".
std::string sandbox_boot_hint(const SandboxSettings& settings, const std::string& why);

} // namespace fcgi_host
