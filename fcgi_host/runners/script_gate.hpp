#pragma once
// --script-root and --script-extensions for --exec programs (php-cgi): which script a request
// may run. The check the relay (script_relay.hpp) makes on every request before the program
// sees it; a refused request is answered 404 by the host.
//
// The script is the one the program would open: SCRIPT_FILENAME (PATH_TRANSLATED when there is
// none), or, when that path does not exist, its longest leading part that is a regular file (the
// rest is PATH_INFO: php-cgi's cgi.fix_pathinfo walk). It is allowed when
//  - that file exists and is a regular file;
//  - the file it resolves to (realpath: every `..` and symbolic link followed) lies under the
//    root, itself resolved once when the gate is made;
//  - with extensions listed, both the name asked for and the file it resolves to end in one of
//    them (php-fpm's security.limit_extensions; a link `x.php` to `upload.txt` is refused).
// A request naming its script twice (two SCRIPT_FILENAME params) is refused: programs differ
// on which one counts.
#include <string>
#include <string_view>
#include <vector>

namespace fcgi_host {

struct ScriptRule {
  std::string root;                    // --script-root ("" = any directory)
  std::vector<std::string> extensions; // --script-extensions (".php"; empty = any name)
  bool enabled() const { return !root.empty() || !extensions.empty(); }
};

class ScriptGate {
public:
  // `error` is set when the root cannot be resolved (the gate then refuses everything).
  ScriptGate(ScriptRule rule, std::string& error);

  // "" when the script at `path` may run, else why not (for the log line).
  std::string refusal(std::string_view path) const;

  // The script a request's params name (see above): `params` is the PARAMS stream's content.
  // "" with `why` set when there is none, it is given twice, or the params are cut.
  static std::string requested_script(std::string_view params, std::string& why);

private:
  ScriptRule rule_;
  std::string resolved_root_; // realpath of the root, "" when there is none
};

// The extensions of one --script-extensions value: ".php .phar", ".php,.phar" or ".php";
// false with `why` when one does not start with a dot or holds a slash.
bool parse_script_extensions(std::string_view text, std::vector<std::string>& out,
                             std::string& why);

} // namespace fcgi_host
