// The option table (fcgi_host/config/option_table.hpp) against what an operator reads: --help, the
// man page, the shipped config and the README's option table list the same options, and --help,
// the man page and the config show the table's defaults.
#include "fcgi_host/cli/config.hpp"
#include "fcgi_host/config/option_table.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <iterator>
#include <set>
#include <sstream>
#include <string>

using fcgi_host::kOptions;
using fcgi_host::OptionKind;

namespace {

std::string source_file(const std::string& path) {
  std::ifstream in(std::string(FCGI_HOST_SOURCE_DIR) + "/" + path);
  REQUIRE_MESSAGE(in, path);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

std::string help_text() {
  const char* argv[] = {"fcgi-host", "--help"};
  fcgi_host::Config ignored;
  std::ostringstream out;
  fcgi_host::parse_config(2, argv, ignored, out);
  return out.str();
}

// Every `--name` (or `\-\-name` in roff) in `text`.
std::set<std::string> option_names(const std::string& text, const std::string& dashes) {
  std::set<std::string> names;
  for (std::size_t at = text.find(dashes); at != std::string::npos;
       at = text.find(dashes, at + 1)) {
    std::size_t p = at + dashes.size();
    std::string name;
    while (p < text.size()) {
      if (text.compare(p, 2, "\\-") == 0) {
        name += '-';
        p += 2;
      } else if ((text[p] >= 'a' && text[p] <= 'z') || text[p] == '-') {
        name += text[p++];
      } else {
        break;
      }
    }
    if (!name.empty() && name.front() != '-') names.insert(name);
  }
  return names;
}

std::set<std::string> table_names(bool with_commands) {
  std::set<std::string> names;
  for (const auto& o : kOptions)
    if (with_commands || o.kind != OptionKind::Command) names.insert(std::string(o.name));
  return names;
}

std::string section(const std::string& text, const std::string& from, const std::string& to) {
  std::size_t a = text.find(from);
  REQUIRE_MESSAGE(a != std::string::npos, from);
  std::size_t b = text.find(to, a);
  REQUIRE_MESSAGE(b != std::string::npos, to);
  return text.substr(a, b - a);
}

std::string roff(std::string_view s) {
  std::string out;
  for (char c : s)
    out += c == '-' ? std::string("\\-") : std::string(1, c);
  return out;
}

} // namespace

TEST_CASE("--help lists every option of the table with its default") {
  std::string help = section(help_text(), "Options (", "Health checks");
  CHECK(option_names(help, "--") == table_names(true));
  for (const auto& o : kOptions) {
    if (o.default_text.empty()) continue;
    // An on|off option may stand alone: Boost shows `--name [=on|off(=on)] (=default)`.
    std::string value = o.kind == OptionKind::OnOff ? "[=" + std::string(o.value_name) + "(=on)]"
                                                    : std::string(o.value_name);
    std::string shown = "--" + std::string(o.name) + (o.short_name ? " ] " : " ") + value +
                        " (=" + std::string(o.default_text) + ")";
    CHECK_MESSAGE(help.find(shown) != std::string::npos, shown);
  }
}

TEST_CASE("the man page lists every option of the table with its default") {
  std::string options =
      section(source_file("docs/fcgi-host.1"), ".SH OPTIONS", ".SH HEALTH CHECKS");
  CHECK(option_names(options, "\\-\\-") == table_names(true));
  for (const auto& o : kOptions) {
    // The entry: from its .TP line to the next .TP or .SS.
    std::size_t at = options.find("\\-\\-" + roff(o.name) + " ");
    if (at == std::string::npos) at = options.find("\\-\\-" + roff(o.name) + "\n");
    REQUIRE_MESSAGE(at != std::string::npos, o.name);
    std::size_t end = std::min(options.find("\n.TP", at), options.find("\n.SS", at));
    std::string entry = options.substr(at, end - at);
    for (char& c : entry)
      if (c == '\n') c = ' ';
    if (!o.default_text.empty())
      CHECK_MESSAGE(entry.find("Default: " + std::string(o.default_text) + ".") !=
                        std::string::npos,
                    o.name << " in the man page: " << entry);
  }
}

TEST_CASE("conf/fcgi-host.conf has a line for every option, commented ones show the default") {
  std::istringstream conf(source_file("conf/fcgi-host.conf"));
  std::set<std::string> names;
  for (std::string line; std::getline(conf, line);) {
    bool commented = line.starts_with(";");
    std::size_t eq = line.find(" = ");
    if (line.empty() || line[0] == '#' || eq == std::string::npos) continue;
    std::string name = line.substr(commented, eq - commented);
    std::string value = line.substr(eq + 3);
    if (name == "include") continue; // a file-only directive: the package's pools.d/
    names.insert(name);
    const fcgi_host::OptionSpec* o = fcgi_host::find_option(name);
    REQUIRE_MESSAGE(o, "the config sets an unknown option: " << name);
    if (commented && !o->default_text.empty())
      CHECK_MESSAGE(value == o->default_text,
                    name << " = " << value << ", the default is " << o->default_text);
  }
  CHECK(names == table_names(false));
  // As shipped, it runs the pools of conf/pools.d/: the package's one application.
  std::string path = std::string(FCGI_HOST_SOURCE_DIR) + "/conf/fcgi-host.conf";
  const char* argv[] = {"fcgi-host", "--config", path.c_str(), "--pool", "www"};
  std::ostringstream out;
  fcgi_host::Config all;
  fcgi_host::parse_config(3, argv, all, out);
  CHECK(all.pools == std::vector<std::string>{"www"});
  fcgi_host::Config c;
  fcgi_host::parse_config(5, argv, c, out);
  CHECK(c.user == "fcgi-host");
  CHECK(c.socket_group == "www-data");
  CHECK(c.listen.to_string() == "unix:/run/fcgi-host/fcgi-host.sock");
}

TEST_CASE("the README's option table names the table's options") {
  std::string readme = source_file("README.md");
  std::string rows;
  std::istringstream in(readme);
  for (std::string line; std::getline(in, line);)
    if (line.starts_with("| `--")) rows += line + "\n";
  std::set<std::string> listed = option_names(rows, "--"), table = table_names(true);
  for (const std::string& name : table)
    CHECK_MESSAGE(listed.count(name), "the README's option table lacks --" << name);
  for (const std::string& name : listed)
    CHECK_MESSAGE(table.count(name), "the README lists --" << name << ", not an option");
}

TEST_CASE("the defaults of Limits and of the record guard are the table's") {
  fcgi_host::Limits l;
  CHECK(l.request.max_body == 8u << 20);
  CHECK(l.request.max_params_size == 64u << 10);
  CHECK(l.keepalive_timeout.count() == 75'000);
  fcgi_host::Config c;
  CHECK(c.socket_mode == 0660);
  CHECK(c.app == "hello");
}

TEST_CASE("--help's Usage and the man page's SYNOPSIS name every subcommand") {
  const std::string help = help_text();
  const std::string usage = help.substr(0, help.find("\nA FastCGI application host"));
  const std::string man = source_file("docs/fcgi-host.1");
  const std::size_t synopsis = man.find(".SH SYNOPSIS");
  REQUIRE(synopsis != std::string::npos);
  const std::string synopsis_text =
      man.substr(synopsis, man.find(".SH DESCRIPTION", synopsis) - synopsis);
  for (const char* command : {"status", "ping", "replay", "reload", "scale"}) {
    CAPTURE(command);
    CHECK(usage.find(std::string("fcgi-host ") + command + " ") != std::string::npos);
    CHECK(synopsis_text.find(std::string(".B fcgi-host ") + command) != std::string::npos);
  }
}
