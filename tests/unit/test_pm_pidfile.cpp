#include "process_manager/pidfile.hpp"
#include "support/files.hpp"

#include <csignal>
#include <cstdlib>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sys/wait.h>
#include <system_error>
#include <unistd.h>

using namespace process_manager;
namespace fs = std::filesystem;

namespace {

void write_text(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

std::size_t entries(const fs::path& dir) {
  return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir), {}));
}

} // namespace

TEST_CASE("pidfile: written with our pid, nothing else left in the directory, removed after") {
  test_support::TempDir dir("pm-pidfile");
  fs::path p = dir.file("master.pid");
  {
    Pidfile pf(p.string());
    CHECK(Pidfile::read(p.string()) == getpid());
    CHECK(entries(dir.path()) == 1); // the temporary file was renamed, not left behind
  }
  CHECK_FALSE(fs::exists(p));
}

TEST_CASE("pidfile: refuses a file another master holds locked, and leaves it as it was") {
  test_support::TempDir dir("pm-pidfile");
  fs::path p = dir.file("master.pid");
  Pidfile first(p.string());
  std::string before = std::to_string(getpid()) + "\n";
  try {
    Pidfile second(p.string());
    FAIL("a second pidfile on a locked file was accepted");
  } catch (const std::system_error& e) {
    CHECK(e.code().value() == EWOULDBLOCK);
    CHECK(std::string(e.what()).find(p.string()) != std::string::npos);
    CHECK(std::string(e.what()).find("locked by running process " + std::to_string(getpid())) !=
          std::string::npos);
  }
  std::ifstream in(p);
  CHECK(std::string(std::istreambuf_iterator<char>(in), {}) == before);
}

TEST_CASE("pidfile: a live pid in an unlocked file does not block (a zombie, a recycled pid)") {
  test_support::TempDir dir("pm-pidfile");
  fs::path p = dir.file("master.pid");
  write_text(p, std::to_string(getppid()) + "\n");
  Pidfile pf(p.string());
  CHECK(Pidfile::read(p.string()) == getpid());
}

TEST_CASE("pidfile: the lock goes with the process, even while it is an unreaped zombie") {
  test_support::TempDir dir("pm-pidfile");
  fs::path p = dir.file("master.pid");
  int ready[2];
  REQUIRE(pipe(ready) == 0);
  pid_t child = fork();
  REQUIRE(child != -1);
  if (child == 0) {
    try {
      Pidfile pf(p.string());
      [[maybe_unused]] ssize_t n = ::write(ready[1], "R", 1);
      pause(); // killed below
    } catch (...) {}
    _exit(1);
  }
  ::close(ready[1]);
  char byte = 0;
  REQUIRE(::read(ready[0], &byte, 1) == 1);
  ::close(ready[0]);
  CHECK_THROWS_AS(Pidfile(p.string()), std::system_error);
  kill(child, SIGKILL);
  // Not reaped yet: a zombie whose pid the file still names.
  siginfo_t info{};
  REQUIRE(waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT) == 0);
  CHECK(Pidfile::read(p.string()) == child);
  {
    Pidfile pf(p.string());
    CHECK(Pidfile::read(p.string()) == getpid());
  }
  waitpid(child, nullptr, 0);
}

TEST_CASE("pidfile: an inherited locked descriptor is taken over") {
  test_support::TempDir dir("pm-pidfile");
  fs::path p = dir.file("master.pid");
  Pidfile old(p.string());
  int fd = fcntl(old.fd(), F_DUPFD_CLOEXEC, 3);
  REQUIRE(fd >= 0);
  {
    Pidfile taken(p.string(), fd);
    CHECK(Pidfile::read(p.string()) == getpid());
    CHECK_THROWS_AS(Pidfile(p.string()), std::system_error);
  }
}

TEST_CASE("pidfile: a stale file is replaced") {
  test_support::TempDir dir("pm-pidfile");
  fs::path p = dir.file("master.pid");
  pid_t dead = fork();
  REQUIRE(dead != -1);
  if (dead == 0) _exit(0);
  waitpid(dead, nullptr, 0);
  write_text(p, std::to_string(dead) + "\n");
  Pidfile pf(p.string());
  CHECK(Pidfile::read(p.string()) == getpid());
}

TEST_CASE("pidfile: not removed when another process has taken it over") {
  test_support::TempDir dir("pm-pidfile");
  fs::path p = dir.file("master.pid");
  {
    Pidfile pf(p.string());
    write_text(p, "1\n");
  }
  CHECK(fs::exists(p));
}

TEST_CASE("pidfile: an unwritable directory names the path") {
  CHECK_THROWS_AS(Pidfile("/nonexistent-dir/master.pid"), std::system_error);
}
