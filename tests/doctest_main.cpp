// Every test binary's main: CTest runs one case per process, and each process gets a scratch
// TMPDIR of its own, removed at exit with whatever the case and the processes it started left
// there (a master killed with SIGKILL leaves its plugin directory; a killed pool master its
// status directory). So a full run leaves nothing in /tmp. The directory is 0711: a worker
// that dropped to another user still reaches the files it is given the names of.
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace {

class ScratchTmpdir {
public:
  ScratchTmpdir() {
    const char* outer = std::getenv("TMPDIR");
    std::string tmpl =
        std::string(outer && *outer == '/' ? outer : "/tmp") + "/fcgi-host-tests.XXXXXX";
    if (!::mkdtemp(tmpl.data()) || ::chmod(tmpl.c_str(), 0711) != 0) {
      std::perror(("scratch TMPDIR " + tmpl).c_str());
      return; // the tests still run, in the outer TMPDIR
    }
    path_ = tmpl;
    ::setenv("TMPDIR", path_.c_str(), 1);
  }
  ~ScratchTmpdir() {
    if (path_.empty()) return;
    // A process the case killed may still be exiting and remove a file of its own meanwhile:
    // a few tries, each over what is left.
    for (int attempt = 0; attempt < 5; ++attempt) {
      std::error_code ec;
      std::filesystem::remove_all(path_, ec);
      if (!ec) return;
    }
  }
  ScratchTmpdir(const ScratchTmpdir&) = delete;
  ScratchTmpdir& operator=(const ScratchTmpdir&) = delete;

private:
  std::string path_;
};

} // namespace

int main(int argc, char** argv) {
  ScratchTmpdir scratch;
  return doctest::Context(argc, argv).run();
}
