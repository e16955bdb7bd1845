#include "fcgi_host/cli/start_checks.hpp"

#include "fcgi_host/net/listen_socket.hpp" // StartupError
#include "fcgi_host/worker/process_setup.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <grp.h>
#include <netdb.h>
#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>
#include <vector>

namespace fcgi_host {
namespace {

void check_user(const Config& c, const char* option, const std::string& name) {
  if (!name.empty() && !getpwnam(name.c_str()))
    throw ConfigError(c.where(option) + ": unknown user \"" + name + "\"");
}

void check_group(const Config& c, const char* option, const std::string& name) {
  if (!name.empty() && !getgrnam(name.c_str()))
    throw ConfigError(c.where(option) + ": unknown group \"" + name + "\"");
}

void check_privileges(const Config& c) {
  check_user(c, "user", c.user);
  check_group(c, "group", c.group);
  check_user(c, "socket-owner", c.socket_owner);
  check_group(c, "socket-group", c.socket_group);
  if ((!c.user.empty() || !c.group.empty()) && geteuid() != 0)
    throw ConfigError(c.where(c.user.empty() ? "group" : "user") +
                      ": fcgi-host must be started as root to change user");
}

void check_directory(const Config& c, const char* option, const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0)
    throw ConfigError(c.where(option) + ": \"" + path + "\": " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode))
    throw ConfigError(c.where(option) + ": \"" + path + "\" is not a directory");
}

// The program as execvp would find it: a path, or a name on $PATH.
bool executable(const std::string& program) {
  if (program.find('/') != std::string::npos) {
    struct stat st {};
    return ::stat(program.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
           ::access(program.c_str(), X_OK) == 0;
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (std::size_t start = 0; start <= dirs.size();) {
    std::size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    if (executable((dir.empty() ? "." : dir) + "/" + program)) return true;
    start = end + 1;
  }
  return false;
}

void check_program(const Config& c) {
  if (c.exec.empty()) return;
  if (c.threads > 1)
    throw ConfigError(c.where("threads") + ": an --exec program runs its own loop; threads are "
                                           "for --app handlers");
  // A relative path is looked up from --chdir, where the master runs the workers.
  std::string program = c.exec.front();
  if (!c.chdir.empty() && program.find('/') != std::string::npos && program.front() != '/')
    program = c.chdir + "/" + program;
  if (!executable(program))
    throw ConfigError(c.where("exec") + ": \"" + c.exec.front() + "\" is not an executable file" +
                      (program.find('/') == std::string::npos ? " on $PATH" : ""));
}

void check_address(const Config& c, const char* option, const std::string& text) {
  ListenAddress a;
  std::string why;
  if (!parse_listen_address(text, a, why)) return; // the parser has refused it already
  if (a.kind != ListenAddress::Kind::Tcp || a.host.empty()) return;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  int rc = getaddrinfo(a.host.c_str(), std::to_string(a.port).c_str(), &hints, &found);
  if (rc != 0)
    throw ConfigError(c.where(option) + ": cannot resolve \"" + a.host + "\": " + gai_strerror(rc));
  freeaddrinfo(found);
}

// A log file that exists must be writable; one that does not needs a writable directory.
void check_writable_file(const Config& c, const char* option, const std::string& path) {
  if (path.empty()) return;
  if (::access(path.c_str(), F_OK) == 0) {
    if (::access(path.c_str(), W_OK) != 0)
      throw ConfigError(c.where(option) + ": \"" + path + "\": " + std::strerror(errno));
    return;
  }
  std::string dir = path.find('/') == std::string::npos ? "." : path.substr(0, path.rfind('/'));
  if (dir.empty()) dir.assign(1, '/'); // (not = "/": a false -Wrestrict of GCC 12 -O2)
  if (::access(dir.c_str(), W_OK) != 0)
    throw ConfigError(c.where(option) + ": cannot create \"" + path + "\": " + dir + ": " +
                      std::strerror(errno));
}

// Whether `who` (a user the workers change to) may create files in a directory of `st`, by
// its mode bits (owner, then the user's groups, then others), as the kernel decides.
bool writable_by(const struct stat& st, const Credentials& who) {
  constexpr mode_t kOwner = S_IWUSR | S_IXUSR, kGroup = S_IWGRP | S_IXGRP,
                   kOther = S_IWOTH | S_IXOTH;
  if (who.uid == 0) return true;
  if (st.st_uid == who.uid) return (st.st_mode & kOwner) == kOwner;
  std::vector<gid_t> groups(64);
  int n = static_cast<int>(groups.size());
  if (!who.user.empty() && getgrouplist(who.user.c_str(), who.gid, groups.data(), &n) < 0) {
    groups.resize(static_cast<std::size_t>(n));
    getgrouplist(who.user.c_str(), who.gid, groups.data(), &n);
  }
  groups.resize(who.user.empty() ? 0 : static_cast<std::size_t>(n));
  groups.push_back(who.gid);
  for (gid_t g : groups)
    if (g == st.st_gid) return (st.st_mode & kGroup) == kGroup;
  return (st.st_mode & kOther) == kOther;
}

// --capture-crashes: the workers write there, as their own user.
void check_capture_dir(const Config& c) {
  if (c.capture_dir.empty()) return;
  check_directory(c, "capture-crashes", c.capture_dir);
  Credentials who;
  try {
    who = resolve_credentials(c.user, c.group);
  } catch (const StartupError&) {
    return; // said by the checks of --user and --group
  }
  struct stat st {};
  ::stat(c.capture_dir.c_str(), &st);
  bool ok = who.change ? writable_by(st, who) : ::access(c.capture_dir.c_str(), W_OK | X_OK) == 0;
  if (!ok)
    throw ConfigError(c.where("capture-crashes") + ": \"" + c.capture_dir +
                      "\" is not a directory the workers' user (" +
                      (who.change ? who.run_as : std::string("the user running fcgi-host")) +
                      ") may write");
}

} // namespace

// memory-max and cpu-weight are a pool's cgroup, which the master of the pools makes: one
// application has its service's cgroup (systemd's MemoryMax=, CPUWeight=).
void check_cgroup_options(const Config& config) {
  if (!config.pool.empty() || !config.wants_cgroup()) return;
  throw ConfigError(config.where(config.memory_max ? "memory-max" : "cpu-weight") +
                    ": a pool option (a [NAME] section of --config); for one application, "
                    "systemd's MemoryMax= and CPUWeight= set its service's cgroup");
}

void check_before_start(const Config& config) {
  check_privileges(config);
  check_cgroup_options(config);
  if (!config.chdir.empty()) check_directory(config, "chdir", config.chdir);
  check_program(config);
  if (config.listen.kind != ListenAddress::Kind::Inherited)
    check_address(config, "listen", config.listen.to_string());
  if (!config.status_listen.empty()) check_address(config, "status-listen", config.status_listen);
  check_writable_file(config, "error-log", config.error_log);
  check_writable_file(config, "access-log", config.access_log);
  check_writable_file(config, "pidfile", config.pidfile);
  check_capture_dir(config);
}

} // namespace fcgi_host
