#include "process_manager/pidfile.hpp"

#include <cstdlib>
#include <doctest/doctest.h>
#include <filesystem>
#include <fstream>
#include <sys/wait.h>
#include <system_error>
#include <unistd.h>

using namespace process_manager;
namespace fs = std::filesystem;

namespace {

struct TempDir {
  fs::path path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "pm-pidfile-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() { fs::remove_all(path); }
};

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

std::size_t entries(const fs::path& dir) {
  return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir), {}));
}

} // namespace

TEST_CASE("pidfile: written with our pid, nothing else left in the directory, removed after") {
  TempDir dir;
  fs::path p = dir.path / "master.pid";
  {
    Pidfile pf(p.string());
    CHECK(Pidfile::read(p.string()) == getpid());
    CHECK(entries(dir.path) == 1); // the temporary file was renamed, not left behind
  }
  CHECK_FALSE(fs::exists(p));
}

TEST_CASE("pidfile: refuses a file naming a live process") {
  TempDir dir;
  fs::path p = dir.path / "master.pid";
  write_text(p, std::to_string(getppid()) + "\n");
  CHECK_THROWS_AS(Pidfile(p.string()), std::system_error);
  try {
    Pidfile pf(p.string());
  } catch (const std::system_error& e) {
    CHECK(std::string(e.what()).find(p.string()) != std::string::npos);
  }
  CHECK(Pidfile::read(p.string()) == getppid()); // left alone
}

TEST_CASE("pidfile: a stale file is replaced") {
  TempDir dir;
  fs::path p = dir.path / "master.pid";
  pid_t dead = fork();
  REQUIRE(dead != -1);
  if (dead == 0) _exit(0);
  waitpid(dead, nullptr, 0);
  write_text(p, std::to_string(dead) + "\n");
  Pidfile pf(p.string());
  CHECK(Pidfile::read(p.string()) == getpid());
}

TEST_CASE("pidfile: not removed when another process has taken it over") {
  TempDir dir;
  fs::path p = dir.path / "master.pid";
  {
    Pidfile pf(p.string());
    write_text(p, "1\n");
  }
  CHECK(fs::exists(p));
}

TEST_CASE("pidfile: an unwritable directory names the path") {
  CHECK_THROWS_AS(Pidfile("/nonexistent-dir/master.pid"), std::system_error);
}
