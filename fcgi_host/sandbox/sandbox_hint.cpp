#include "fcgi_host/sandbox/sandbox_hint.hpp"

#include <string_view>
#include <vector>

namespace fcgi_host {
namespace {

// The absolute paths a message names: "/" up to a space, a quote, a colon, a comma or a
// closing parenthesis.
std::vector<std::string> paths_in(const std::string& text) {
  std::vector<std::string> paths;
  for (std::size_t at = text.find('/'); at != std::string::npos; at = text.find('/', at)) {
    const bool starts =
        at == 0 || std::string_view(" \"'(=").find(text[at - 1]) != std::string_view::npos;
    std::size_t end = text.find_first_of(" \"':,)", at);
    if (end == std::string::npos) end = text.size();
    if (starts && end - at > 1) paths.push_back(text.substr(at, end - at));
    at = end;
  }
  return paths;
}

bool under(const std::string& path, const std::string& dir) {
  if (dir.empty() || !path.starts_with(dir)) return false;
  return path.size() == dir.size() || dir.back() == '/' || path[dir.size()] == '/';
}

bool under_any(const std::string& path, const std::vector<std::string>& dirs) {
  for (const std::string& dir : dirs)
    if (under(path, dir)) return true;
  return false;
}

std::string listed(const std::vector<std::string>& dirs) {
  if (dirs.empty()) return "none";
  std::string text;
  for (const std::string& dir : dirs)
    text += (text.empty() ? "" : " ") + dir;
  return text;
}

// Whether a failure reads like a file that could not be opened, created or written: what the
// sandbox or a private /tmp cause (not a failure of the sandbox itself, which says so).
bool about_files(const std::string& why) {
  if (why.starts_with("sandbox:") || why.find(": sandbox:") != std::string::npos) return false;
  for (const char* word : {"open", "denied", "No such file", "not permitted", "Read-only",
                           "read-only", "EACCES", "EPERM", "ENOENT"})
    if (why.find(word) != std::string::npos) return true;
  return false;
}

} // namespace

std::string sandbox_boot_hint(const SandboxSettings& settings, const std::string& why) {
  std::string hint;
  if (!about_files(why)) return hint;
  const std::vector<std::string> paths = paths_in(why);
  if (settings.enabled()) {
    hint = "; the worker booted inside its sandbox (--sandbox " +
           std::string(to_string(settings.mode)) +
           ": on_thread_start and the requests run in it, on_worker_start before it closes), "
           "where it writes only under --sandbox-write (" +
           listed(settings.write) + ") and reads only those, --sandbox-read (" +
           listed(settings.read) + ") and the system's libraries";
    std::string outside;
    for (const std::string& p : paths)
      if (!under_any(p, settings.write) && !under_any(p, settings.host_write)) {
        outside = p;
        break;
      }
    hint += outside.empty() ? "; a file elsewhere cannot be opened"
                            : "; \"" + outside + "\" is not under --sandbox-write";
    hint += ": list its directory with --sandbox-write DIR (or --sandbox-read DIR)";
  }
  if (settings.private_tmp) {
    bool in_tmp = false;
    for (const std::string& p : paths)
      in_tmp = in_tmp || under(p, "/tmp");
    if (in_tmp || paths.empty())
      hint += std::string("; /tmp is the pool's own (--private-tmp on): ") +
              "the machine's /tmp is not there";
  }
  return hint;
}

} // namespace fcgi_host
