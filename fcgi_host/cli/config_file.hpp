#pragma once
// The config file as written: `name = value` lines, `[NAME]` sections that start a pool (php-fpm's
// form) and `include = GLOB` lines that read more files (Debian's pools.d/*.conf). Only reads and
// sorts the lines; what each option means is config.cpp's business. Errors name the file and line.
//
//   pidfile = /run/fcgi-host.pid          global: before the first section of the main file;
//   workers = 2                           every per-pool option here is a default for every pool
//   include = pools.d/*.conf              relative to this file's directory, in name order
//   [api]                                 a pool: [A-Za-z0-9_-]+, once across all the files
//   listen = unix:/run/fcgi-host/api.sock
//
// Comments: `#` or `;` at the start of a line or after a space or tab, to the end of the line,
// after a value or a section too (`workers = 8   # per pool`). Inside a word they are text
// (`a#b`). A value with ` #` or ` ;` in it is written in double quotes: `env = "A=x #1"`.
#include <string>
#include <vector>

namespace fcgi_host {

struct ConfigLine {
  std::string where; // "FILE:LINE" (and " [pool]" inside a section)
  std::string name;
  std::string value;
};

struct PoolSection {
  std::string name;
  std::string where; // the `[name]` line
  std::vector<ConfigLine> lines;
};

struct ConfigFile {
  std::vector<ConfigLine> globals;
  std::vector<PoolSection> pools;
  bool has_pools = false; // a section or an include: the pools form, even with no pool yet
  const PoolSection* find_pool(const std::string& name) const;
};

// Options that only the master that runs every pool takes: refused inside a section.
bool is_global_only_option(const std::string& name);

// Reads `path` and what it includes. Throws ConfigError: unreadable or a directory, a line that
// is not `name = value` or `[name]`, a bad or repeated pool name, an include inside a section or
// in an included file's globals, an include cycle, a pool form with no pool.
ConfigFile read_config_file(const std::string& path);

} // namespace fcgi_host
