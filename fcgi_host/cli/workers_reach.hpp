#pragma once
// Whether the workers' user can reach a file the workers open or run themselves (an --exec
// program, the scripts under --script-root, the directory a plugin's copy is made in): every
// directory from / down to it must let that user search it (x), and the file itself grant what
// the workers do with it. A checkout in /root or in a mkdtemp() directory (0700) blocks a
// worker that runs as nobody, which would otherwise fail only at its exec, with EACCES.
#include "fcgi_host/worker/process_setup.hpp" // Credentials

#include <string>
#include <sys/stat.h>

namespace fcgi_host {

// Whether the mode bits of `st` give `who` every right of `need` (R_OK, W_OK, X_OK or'ed), as
// the kernel decides: owner, then the user's groups, then others. Root has every right but
// X_OK on a file no one may execute.
bool permitted_by(const struct stat& st, const Credentials& who, int need);

// "" when `who` reaches `path` (an absolute path) with `need` on it; else why not, naming the
// directory (or the file) that blocks: "directory \"/root\" (mode 0700, owner root) does not
// let nobody:nogroup search it". `who.change` false: the user running fcgi-host (access(2)).
std::string unreachable_by(const std::string& path, const Credentials& who, int need);

} // namespace fcgi_host
