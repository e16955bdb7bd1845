#include "fcgi_host/cli/config_file.hpp"

#include "fcgi_host/cli/config.hpp"
#include "process_manager/path_checks.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <glob.h>
#include <set>
#include <sys/stat.h>
#include <unistd.h>

namespace fcgi_host {
namespace {

std::string trim(std::string s) {
  s.erase(0, s.find_first_not_of(" \t\r"));
  s.erase(s.find_last_not_of(" \t\r") + 1);
  return s;
}

// The line without its comment. A comment starts with `#` or `;` at the start of the line or after
// a space or tab, and runs to the end of the line (php-fpm's users write them after values). A
// `#` or `;` inside a word stays (`a#b`, `http://x/#top`); a value that needs one after a space is
// written in double quotes, which `value_of` takes off.
std::string without_comment(const std::string& line) {
  bool quoted = false; // inside a value that starts with a double quote
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '"' && (quoted || line.find_first_not_of(" \t", line.find('=') + 1) == i))
      quoted = !quoted;
    else if (!quoted && (c == '#' || c == ';') &&
             (i == 0 || line[i - 1] == ' ' || line[i - 1] == '\t'))
      return line.substr(0, i);
  }
  return line;
}

// A value as written after `=` (comment gone, trimmed): in double quotes, what is between them,
// taken as is; the quotes must close and nothing may follow them.
std::string value_of(const std::string& where, const std::string& written) {
  if (written.empty() || written.front() != '"') return written;
  const auto close = written.find('"', 1);
  if (close == std::string::npos)
    throw ConfigError(where + ": the value's double quote is not closed: " + written);
  if (close + 1 != written.size())
    throw ConfigError(where + ": text after the value's closing double quote: " + written);
  return written.substr(1, close - 1);
}

bool valid_pool_name(const std::string& name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
           c == '-';
  });
}

std::string directory_of(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
}

// The files an include names, in name order (glob(3) sorts); none is not an error.
std::vector<std::string> expand_include(const std::string& where, const std::string& pattern,
                                        const std::string& including_file) {
  std::string full =
      pattern.starts_with('/') ? pattern : directory_of(including_file) + "/" + pattern;
  glob_t g{};
  int rc = ::glob(full.c_str(), GLOB_ERR, nullptr, &g);
  std::vector<std::string> files;
  if (rc == 0)
    for (std::size_t i = 0; i < g.gl_pathc; ++i)
      files.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  if (rc != 0 && rc != GLOB_NOMATCH)
    throw ConfigError(where + ": include = " + pattern + ": cannot read \"" + full + "\"");
  return files;
}

// Started as root, the master does what its files say (`user = root`, `exec`): a file another
// user can write, or put in place, is refused (path_checks.hpp). "" when safe, or not root.
std::string unsafe_for_root(const std::string& path) {
  if (::geteuid() != 0) return "";
  if (std::string why = process_manager::unsafe_directory_of(path); !why.empty()) return why;
  // A link's target is read: its directories count too.
  if (char* real = ::realpath(path.c_str(), nullptr)) {
    std::string target = real;
    std::free(real);
    if (std::string why = process_manager::unsafe_directory_of(target); !why.empty()) return why;
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::string("stat() failed: ") + std::strerror(errno);
  return process_manager::unsafe_config_file(st);
}

class Reader {
public:
  ConfigFile file;

  void read(const std::string& path, int depth, const std::string& included_from) {
    struct stat st {};
    if (::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode))
      throw ConfigError(prefix(included_from) + "\"" + path +
                        "\" is a directory, not a config file");
    std::ifstream in(path);
    if (!in)
      throw ConfigError(prefix(included_from) + "cannot read \"" + path +
                        "\": " + std::strerror(errno));
    if (std::string why = unsafe_for_root(path); !why.empty())
      throw ConfigError(prefix(included_from) + "\"" + path + "\" refused: " + why +
                        "; a master started as root reads only config files no other user can "
                        "change");
    if (!open_files_.insert(st.st_ino).second)
      throw ConfigError(included_from + ": include cycle: \"" + path + "\" is already being read");
    PoolSection* section = nullptr;
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      const std::string where = path + ":" + std::to_string(number);
      const std::string text = trim(without_comment(line));
      if (text.empty()) continue;
      if (text.front() == '[') {
        section = start_section(where, text);
        continue;
      }
      take_line(where, text, path, depth, section);
    }
    open_files_.erase(st.st_ino);
  }

private:
  std::set<ino_t> open_files_; // the include chain, for cycles

  static std::string prefix(const std::string& included_from) {
    return included_from.empty() ? "--config: " : included_from + ": include: ";
  }

  PoolSection* start_section(const std::string& where, const std::string& text) {
    if (text.back() != ']')
      throw ConfigError(where + ": expected `[pool-name]`, got \"" + text + "\"");
    std::string name = trim(text.substr(1, text.size() - 2));
    if (!valid_pool_name(name))
      throw ConfigError(where + ": pool name '" + name +
                        "' must be letters, digits, '-' and '_' only");
    if (const PoolSection* other = file.find_pool(name))
      throw ConfigError(where + ": pool [" + name + "] is defined twice (first at " + other->where +
                        ")");
    file.has_pools = true;
    file.pools.push_back({name, where, {}});
    return &file.pools.back();
  }

  void take_line(const std::string& where, const std::string& text, const std::string& path,
                 int depth, PoolSection* section) {
    auto eq = text.find('=');
    if (eq == std::string::npos)
      throw ConfigError(where + ": expected `name = value` or `[pool-name]`, got \"" + text + "\"");
    ConfigLine l{where, trim(text.substr(0, eq)), value_of(where, trim(text.substr(eq + 1)))};
    if (section) {
      l.where += " [" + section->name + "]";
      if (l.name == "include" || is_global_only_option(l.name))
        throw ConfigError(l.where + ": " + l.name +
                          " is a global option: put it before the first [pool] section");
      section->lines.push_back(std::move(l));
      return;
    }
    if (depth > 0)
      throw ConfigError(where + ": " + l.name +
                        " outside any [pool] section: an included file holds pools only");
    if (l.name != "include") {
      file.globals.push_back(std::move(l));
      return;
    }
    file.has_pools = true;
    for (const std::string& included : expand_include(where, l.value, path))
      read(included, depth + 1, where);
  }
};

} // namespace

const PoolSection* ConfigFile::find_pool(const std::string& name) const {
  for (const PoolSection& p : pools)
    if (p.name == name) return &p;
  return nullptr;
}

bool is_global_only_option(const std::string& name) {
  return name == "pidfile" || name == "error-log" || name == "log-level" ||
         name == "max-workers-total";
}

ConfigFile read_config_file(const std::string& path) {
  Reader reader;
  reader.read(path, 0, "");
  if (reader.file.has_pools && reader.file.pools.empty())
    throw ConfigError("--config: \"" + path + "\" defines no [pool] (its include matched no file)");
  return std::move(reader.file);
}

} // namespace fcgi_host
