#include "fcgi_host/runners/script_gate.hpp"

#include "fcgi_host/protocol/records.hpp"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <sys/stat.h>

namespace fcgi_host {
namespace {

// realpath(3) of `path`, "" when it cannot be resolved.
std::string resolved(const std::string& path) {
  char buf[PATH_MAX];
  return ::realpath(path.c_str(), buf) ? std::string(buf) : std::string();
}

bool is_regular(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

bool exists(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0;
}

// The file the program opens for `path`: the path itself when it exists, else its longest
// leading part that is a regular file (what follows is PATH_INFO); "" when there is none.
std::string script_file(std::string path) {
  if (exists(path)) return path;
  for (std::size_t slash; (slash = path.rfind('/')) != std::string::npos && slash > 0;) {
    path.resize(slash);
    if (is_regular(path)) return path;
  }
  return {};
}

bool has_extension(std::string_view name, const std::vector<std::string>& extensions) {
  std::string_view base = name.substr(name.rfind('/') + 1);
  for (const std::string& e : extensions)
    if (base.size() > e.size() && base.ends_with(e)) return true;
  return false;
}

std::string quoted(std::string_view text) {
  std::string q;
  q.reserve(text.size() + 2);
  q.append(1, '"').append(text).append(1, '"');
  return q;
}

} // namespace

ScriptGate::ScriptGate(ScriptRule rule, std::string& error) : rule_(std::move(rule)) {
  if (rule_.root.empty()) return;
  resolved_root_ = resolved(rule_.root);
  if (resolved_root_.empty())
    error = "--script-root " + quoted(rule_.root) + ": " + std::strerror(errno);
}

std::string ScriptGate::refusal(std::string_view path) const {
  if (path.empty()) return "no SCRIPT_FILENAME";
  if (path.find('\0') != std::string_view::npos) return "a NUL byte in the script's name";
  std::string file = script_file(std::string(path));
  if (file.empty() || !is_regular(file)) return quoted(path) + " is no file";
  if (!rule_.extensions.empty() && !has_extension(file, rule_.extensions))
    return quoted(file) + " has no --script-extensions suffix";
  std::string real = resolved(file);
  if (real.empty()) return quoted(file) + " cannot be resolved";
  if (!rule_.root.empty()) {
    if (resolved_root_.empty()) return "--script-root " + quoted(rule_.root) + " is not there";
    // "/" as the root allows every absolute path; else the root itself or below it.
    bool inside = resolved_root_ == "/" ||
                  (real.size() > resolved_root_.size() && real.starts_with(resolved_root_) &&
                   real[resolved_root_.size()] == '/');
    if (!inside)
      return quoted(path) + " resolves to " + quoted(real) + ", outside --script-root " +
             quoted(rule_.root);
  }
  if (!rule_.extensions.empty() && !has_extension(real, rule_.extensions))
    return quoted(path) + " resolves to " + quoted(real) +
           ", which has no --script-extensions "
           "suffix";
  return {};
}

std::string ScriptGate::requested_script(std::string_view params, std::string& why) {
  std::string_view script, translated;
  int scripts = 0;
  records::NameValue pair;
  for (records::PairStatus s;
       (s = records::next_name_value(params, pair)) != records::PairStatus::End;) {
    if (s == records::PairStatus::Truncated) {
      why = "the params are cut";
      return {};
    }
    if (pair.name == "SCRIPT_FILENAME") script = pair.value, ++scripts;
    if (pair.name == "PATH_TRANSLATED") translated = pair.value;
  }
  if (scripts > 1) {
    why = "SCRIPT_FILENAME given twice";
    return {};
  }
  std::string_view chosen = scripts == 1 ? script : translated;
  if (chosen.empty()) why = "no SCRIPT_FILENAME";
  return std::string(chosen);
}

bool parse_script_extensions(std::string_view text, std::vector<std::string>& out,
                             std::string& why) {
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t end = text.find_first_of(" ,\t", start);
    if (end == std::string_view::npos) end = text.size();
    std::string_view e = text.substr(start, end - start);
    start = end + 1;
    if (e.empty()) continue;
    if (e.size() < 2 || e.front() != '.' || e.find('/') != std::string_view::npos) {
      why = quoted(e) + " is not a suffix such as .php";
      return false;
    }
    out.emplace_back(e);
  }
  if (out.empty()) why = "no suffix given (such as .php)";
  return !out.empty();
}

} // namespace fcgi_host
