// The script check of --exec programs (--script-root, --script-extensions): which script a
// request names, and whether it may run, on real files: `..`, symbolic links out and in,
// PATH_INFO after the script, a root that is itself a link, the suffixes.
#include "fcgi_host/protocol/records.hpp"
#include "fcgi_host/runners/script_gate.hpp"
#include "support/files.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

using fcgi_host::ScriptGate;
using fcgi_host::ScriptRule;
namespace fs = std::filesystem;

namespace {

// site/root/{index.php, notes.txt, sub/page.php, in.php -> index.php, out.php -> ../secret.php,
// txt.php -> notes.txt}, site/secret.php, site/link-root -> root.
struct Site : test_support::TempDir {
  Site() : TempDir("script-gate") {
    for (const char* name : {"root/index.php", "root/notes.txt", "root/sub/page.php", "secret.php"})
      write(name, "<?php\n");
    fs::create_symlink("index.php", file("root/in.php"));
    fs::create_symlink("../secret.php", file("root/out.php"));
    fs::create_symlink("notes.txt", file("root/txt.php"));
    fs::create_symlink("root", file("link-root"));
  }
};

ScriptGate gate(const ScriptRule& rule) {
  std::string error;
  ScriptGate g(rule, error);
  CHECK(error == "");
  return g;
}

std::string params(const std::vector<std::pair<std::string, std::string>>& pairs) {
  std::string out;
  for (const auto& [name, value] : pairs)
    fcgi_host::records::append_name_value(out, name, value);
  return out;
}

} // namespace

TEST_SUITE("script gate") {
  TEST_CASE("--script-root: a script inside runs, outside, .. and a symlink out are refused") {
    Site site;
    ScriptGate g = gate({site.file("root"), {}});
    CHECK(g.refusal(site.file("root/index.php")) == "");
    CHECK(g.refusal(site.file("root/sub/page.php")) == "");
    CHECK(g.refusal(site.file("root/sub/../index.php")) == "");
    CHECK(g.refusal(site.file("root/in.php")) == ""); // a link that stays inside
    CHECK(g.refusal(site.file("secret.php")).find("outside --script-root") != std::string::npos);
    CHECK(g.refusal(site.file("root/../secret.php")).find("outside") != std::string::npos);
    CHECK(g.refusal(site.file("root/sub/../../secret.php")).find("outside") != std::string::npos);
    CHECK(g.refusal(site.file("root/out.php")).find("resolves to \"" + site.file("secret.php")) !=
          std::string::npos);
    CHECK(g.refusal("/etc/passwd").find("outside") != std::string::npos);
    CHECK(g.refusal(site.file("root")).find("is no file") != std::string::npos); // a directory
    CHECK(g.refusal(site.file("root/missing.php")).find("is no file") != std::string::npos);
    CHECK(g.refusal("") == "no SCRIPT_FILENAME");
    CHECK(g.refusal(std::string("/x\0y", 4)).find("NUL") != std::string::npos);
  }

  TEST_CASE("the script php-cgi would run: PATH_INFO after it is not part of it") {
    Site site;
    ScriptGate g = gate({site.file("root"), {".php"}});
    CHECK(g.refusal(site.file("root/index.php/extra/path")) == "");
    CHECK(g.refusal(site.file("root/../secret.php/extra")).find("outside") != std::string::npos);
    CHECK(g.refusal(site.file("root/notes.txt/x.php")).find("no --script-extensions suffix") !=
          std::string::npos);
  }

  TEST_CASE("a root given through a symbolic link is resolved once") {
    Site site;
    ScriptGate g = gate({site.file("link-root"), {}});
    CHECK(g.refusal(site.file("root/index.php")) == "");
    CHECK(g.refusal(site.file("link-root/index.php")) == "");
    CHECK(g.refusal(site.file("secret.php")).find("outside") != std::string::npos);
    std::string error;
    ScriptGate missing({site.file("nowhere"), {}}, error);
    CHECK(error.find("--script-root") != std::string::npos);
    CHECK(missing.refusal(site.file("root/index.php")).find("is not there") != std::string::npos);
  }

  TEST_CASE("--script-extensions: the name asked for and the file it resolves to") {
    Site site;
    ScriptGate g = gate({site.file("root"), {".php", ".phar"}});
    CHECK(g.refusal(site.file("root/index.php")) == "");
    CHECK(g.refusal(site.file("root/notes.txt")).find("no --script-extensions suffix") !=
          std::string::npos);
    // A link named .php to a .txt file: the file it reaches has no listed suffix.
    CHECK(g.refusal(site.file("root/txt.php")).find("which has no --script-extensions") !=
          std::string::npos);
    // Extensions alone: any directory, these suffixes.
    ScriptGate any_dir = gate({"", {".php"}});
    CHECK(any_dir.refusal(site.file("secret.php")) == "");
    CHECK(any_dir.refusal(site.file("root/notes.txt")) != "");
  }

  TEST_CASE("requested_script: SCRIPT_FILENAME, else PATH_TRANSLATED, twice or cut is refused") {
    std::string why;
    CHECK(ScriptGate::requested_script(
              params({{"SCRIPT_FILENAME", "/a.php"}, {"PATH_TRANSLATED", "/b.php"}}), why) ==
          "/a.php");
    CHECK(why == "");
    CHECK(ScriptGate::requested_script(params({{"PATH_TRANSLATED", "/b.php"}}), why) == "/b.php");
    CHECK(ScriptGate::requested_script(params({{"QUERY_STRING", ""}}), why) == "");
    CHECK(why == "no SCRIPT_FILENAME");
    why.clear();
    CHECK(ScriptGate::requested_script(
              params({{"SCRIPT_FILENAME", "/srv/a.php"}, {"SCRIPT_FILENAME", "/etc/x.php"}}),
              why) == "");
    CHECK(why == "SCRIPT_FILENAME given twice");
    why.clear();
    std::string cut = params({{"SCRIPT_FILENAME", "/srv/a.php"}});
    cut.pop_back();
    CHECK(ScriptGate::requested_script(cut, why) == "");
    CHECK(why == "the params are cut");
  }

  TEST_CASE("parse_script_extensions: spaces or commas, each a dot suffix") {
    std::vector<std::string> out;
    std::string why;
    CHECK(fcgi_host::parse_script_extensions(".php .phar,.php5", out, why));
    CHECK(out == std::vector<std::string>{".php", ".phar", ".php5"});
    out.clear();
    CHECK_FALSE(fcgi_host::parse_script_extensions("php", out, why));
    CHECK(why == "\"php\" is not a suffix such as .php");
    CHECK_FALSE(fcgi_host::parse_script_extensions(".", out, why));
    CHECK_FALSE(fcgi_host::parse_script_extensions("./x", out, why));
    out.clear();
    CHECK_FALSE(fcgi_host::parse_script_extensions(" , ", out, why));
    CHECK(why == "no suffix given (such as .php)");
  }
}
