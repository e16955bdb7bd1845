// The plugin directories of masters that are gone are swept by the next master; nothing else is.
// A directory is made only where nobody else can swap it; a source is copied only when it is a
// regular file of a sane size, the master's or root's, that the workers could read themselves.
#include "fcgi_host/runners/plugin_copy.hpp"
#include "support/files.hpp"

#include "fcgi_host/net/listen_socket.hpp" // StartupError

#include <doctest/doctest.h>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

// A pid that ran and is gone (reaped): no process of that pid exists now, barring reuse.
pid_t gone_pid() {
  pid_t pid = ::fork();
  REQUIRE(pid >= 0);
  if (pid == 0) ::_exit(0);
  int status = 0;
  REQUIRE(::waitpid(pid, &status, 0) == pid);
  return pid;
}

// A directory as a killed master leaves it: a copy inside.
fs::path left_behind(const fs::path& root, pid_t owner, const std::string& suffix) {
  fs::path dir = root / ("fcgi-host-plugins." + std::to_string(owner) + "." + suffix);
  fs::create_directory(dir);
  std::ofstream(dir / "1-libapp.so") << "bytes";
  return dir;
}

} // namespace

TEST_CASE("plugin directory: named after its master, swept once that master is gone") {
  test_support::TempDir root("plugin-dir");
  const pid_t dead = gone_pid();
  const fs::path orphan = left_behind(root.path(), dead, "abcdef");
  const fs::path alive = left_behind(root.path(), ::getppid(), "ghijkl");
  const fs::path other_name = fs::path(root.path()) / "fcgi-host-plugins.XXXXXX";
  fs::create_directory(other_name);

  {
    fcgi_host::PluginDirectory dir(static_cast<gid_t>(-1), root.path());
    CHECK(fs::path(dir.path())
              .filename()
              .string()
              .starts_with("fcgi-host-plugins." + std::to_string(::getpid()) + "."));
    CHECK_FALSE(fs::exists(orphan));
    CHECK(fs::exists(alive / "1-libapp.so"));
    CHECK(fs::exists(other_name));
  }
  CHECK(fs::exists(alive)); // the sweep of a second master (this one) leaves the living alone
}

TEST_CASE("plugin directory sweep: a symlink, another user's directory, a locked one are kept") {
  test_support::TempDir root("plugin-dir");
  const pid_t dead = gone_pid();
  // A symlink under a dead master's name, pointing at a directory with a file: nothing followed.
  test_support::TempDir target("plugin-dir");
  std::ofstream(target.file("keep")) << "x";
  const fs::path link =
      fs::path(root.path()) / ("fcgi-host-plugins." + std::to_string(dead) + ".linkxx");
  fs::create_directory_symlink(target.path(), link);
  // One that a sweeper at the same moment holds.
  const fs::path locked = left_behind(root.path(), dead, "lockxx");
  int held = ::open(locked.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  REQUIRE(held >= 0);
  REQUIRE(::flock(held, LOCK_EX | LOCK_NB) == 0);
  // One that another user owns (only root can make it).
  const fs::path foreign = left_behind(root.path(), dead, "userxx");
  const bool root_user = ::geteuid() == 0;
  if (root_user) REQUIRE(::chown(foreign.c_str(), 65534, 65534) == 0);

  CHECK(fcgi_host::sweep_dead_plugin_directories(root.path()) == (root_user ? 0 : 1));
  CHECK(fs::is_symlink(link));
  CHECK(fs::exists(target.file("keep")));
  CHECK(fs::exists(locked / "1-libapp.so"));
  CHECK(fs::exists(foreign) == root_user);

  ::close(held);
  CHECK(fcgi_host::sweep_dead_plugin_directories(root.path()) == 1);
  CHECK_FALSE(fs::exists(locked));
  CHECK(fs::is_symlink(link));
}

TEST_CASE("plugin directory: a root another user could swap it in is refused, a sticky one is "
          "not") {
  test_support::TempDir root("plugin-dir");
  ::chmod(root.path().c_str(), 0777);
  CHECK_THROWS_WITH_AS(fcgi_host::PluginDirectory(static_cast<gid_t>(-1), root.path()),
                       doctest::Contains("writable by others"), fcgi_host::StartupError);
  ::chmod(root.path().c_str(), 01777);
  CHECK_NOTHROW(fcgi_host::PluginDirectory(static_cast<gid_t>(-1), root.path()));
}

TEST_CASE("plugin copy: a FIFO, a 300 MB sparse file and a file the workers cannot read are "
          "refused before a byte is read, a link to a readable file is copied") {
  test_support::TempDir root("plugin-dir");
  auto dir =
      std::make_shared<fcgi_host::PluginDirectory>(static_cast<gid_t>(-1), root.path(), 65534);
  auto refused = [&](const fs::path& source) {
    try {
      fcgi_host::PluginCopy copy(dir, source.string());
    } catch (const fcgi_host::StartupError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  auto copies = [&] {
    std::size_t n = 0;
    for ([[maybe_unused]] const auto& e : fs::directory_iterator(dir->path()))
      ++n;
    return n;
  };

  // A FIFO nobody writes: the open returns at once (O_NONBLOCK), fstat refuses it.
  const fs::path fifo = fs::path(root.path()) / "fifo.so";
  REQUIRE(::mkfifo(fifo.c_str(), 0644) == 0);
  CHECK(refused(fifo).find("not a regular file") != std::string::npos);

  // 300 MB of holes: refused by its size, nothing written.
  const fs::path sparse = fs::path(root.path()) / "sparse.so";
  std::ofstream(sparse).close();
  REQUIRE(::truncate(sparse.c_str(), off_t{300} << 20) == 0);
  CHECK(refused(sparse).find("larger than 256 MiB") != std::string::npos);

  // A file of mode 0600 behind a link: the workers' user (65534) could not read it.
  const fs::path secret = fs::path(root.path()) / "secret";
  std::ofstream(secret) << "root only";
  REQUIRE(::chmod(secret.c_str(), 0600) == 0);
  const fs::path link = fs::path(root.path()) / "libsecret.so";
  fs::create_symlink(secret, link);
  if (::geteuid() != 65534)
    CHECK(refused(link).find("not readable by the workers' user") != std::string::npos);
  CHECK(copies() == 0);

  // The same file readable by everyone, behind the same link (libx.so -> libx.so.1): copied.
  REQUIRE(::chmod(secret.c_str(), 0644) == 0);
  {
    fcgi_host::PluginCopy copy(dir, link.string());
    CHECK(copies() == 1);
    std::ifstream in(copy.path());
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    CHECK(bytes == "root only");
    CHECK_FALSE(copy.source_changed());
  }

  // Writable by others: the master would hand on code anyone can change.
  REQUIRE(::chmod(secret.c_str(), 0646) == 0);
  CHECK(refused(secret).find("writable by others") != std::string::npos);
  CHECK(copies() == 0);
}

TEST_CASE("plugin source check for a mold: the owner is the master's user, not the checker's") {
  // A mold checks the file as the workers' user, for a master of another user.
  const uid_t master = ::geteuid() == 4321 ? 4322 : 4321;
  struct stat st {};
  st.st_mode = S_IFREG | 0644;
  st.st_uid = master;
  st.st_gid = master;
  st.st_size = 4096;
  const uid_t any = static_cast<uid_t>(-1);
  const gid_t any_group = static_cast<gid_t>(-1);
  CHECK(fcgi_host::unsafe_plugin_source(st, any, any_group, master, master) == "");
  CHECK(fcgi_host::unsafe_plugin_source(st, any, any_group, master + 5, master + 5)
            .find("neither root nor the master's user") != std::string::npos);
  st.st_uid = 0; // root's is always the master's to run
  CHECK(fcgi_host::unsafe_plugin_source(st, any, any_group, master, master) == "");
  st.st_mode = S_IFREG | 0664; // its group may write: the master's group only
  CHECK(fcgi_host::unsafe_plugin_source(st, any, any_group, master, master) == "");
  CHECK(fcgi_host::unsafe_plugin_source(st, any, any_group, master, master + 1)
            .starts_with("writable by group"));
  st.st_mode = S_IFIFO | 0644;
  CHECK(fcgi_host::unsafe_plugin_source(st, any, any_group, master, master) ==
        "not a regular file");
  st.st_mode = S_IFREG | 0644;
  st.st_size = fcgi_host::kMaxPluginBytes + 1;
  CHECK(fcgi_host::unsafe_plugin_source(st, any, any_group, master, master)
            .starts_with("larger than 256 MiB"));
}
