#include "fcgi_host/cli/start_checks.hpp"

#include "fcgi_host/cli/app_source.hpp" // looks_like_path
#include "fcgi_host/cli/settings_from_config.hpp"
#include "fcgi_host/cli/workers_reach.hpp"
#include "fcgi_host/sandbox/sandbox.hpp"
#include "fcgi_host/sys_error.hpp"
#include "fcgi_host/worker/process_setup.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <grp.h>
#include <netdb.h>
#include <optional>
#include <pwd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
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

// The program as execvp would find it, as an absolute path ("" when there is none): a path
// (relative ones from `dir`), or a name on $PATH.
std::string find_program(const std::string& program, const std::string& dir) {
  if (program.find('/') != std::string::npos) {
    std::string path = program.front() == '/' ? program : dir + "/" + program;
    struct stat st {};
    bool ok =
        ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
    return ok ? path : "";
  }
  const char* path = std::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/bin:/usr/bin:/bin";
  for (std::size_t start = 0; start <= dirs.size();) {
    std::size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string entry = dirs.substr(start, end - start);
    if (std::string found = find_program((entry.empty() ? "." : entry) + "/" + program, dir);
        !found.empty())
      return found;
    start = end + 1;
  }
  return "";
}

// The workers' user, or nullopt when --user/--group cannot be resolved (their own checks say
// why).
std::optional<Credentials> workers_user(const Config& c) {
  try {
    return resolve_credentials(c.user, c.group);
  } catch (const StartupError&) {
    return std::nullopt;
  }
}

// A file the workers use themselves must be within their user's reach (workers_reach.hpp).
void check_workers_reach(const Config& c, const char* option, const std::string& what,
                         const std::string& path, int need) {
  const std::optional<Credentials> who = workers_user(c);
  if (!who) return;
  if (std::string why = unreachable_by(path, *who, need); !why.empty())
    throw ConfigError(c.where(option) + ": the workers' user (" +
                      (who->change ? who->run_as : std::string("the user running fcgi-host")) +
                      ") cannot reach " + what + ": " + why +
                      "; move it, or open that directory to the workers' user");
}

void check_program(const Config& c) {
  if (c.exec.empty()) return;
  if (c.threads > 1)
    throw ConfigError(c.where("threads") + ": an --exec program runs its own loop; threads are "
                                           "for --app handlers");
  // A relative path is looked up from --chdir, where the master runs the workers.
  const std::string& program = c.exec.front();
  std::string found = find_program(program, c.chdir.empty() ? current_directory() : c.chdir);
  if (found.empty())
    throw ConfigError(c.where("exec") + ": \"" + program + "\" is not an executable file" +
                      (program.find('/') == std::string::npos ? " on $PATH" : ""));
  // The workers exec it as their own user.
  check_workers_reach(c, "exec", "the program \"" + program + "\"", found, X_OK);
}

// A Unix socket is made where its path says, by the master: its directory must be there and
// writable, and a file of another kind is never replaced (listen_socket.cpp).
void check_unix_path(const Config& c, const char* option, const std::string& path) {
  const std::string dir = path.rfind('/') == 0 ? "/" : path.substr(0, path.rfind('/'));
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0)
    throw ConfigError(c.where(option) + ": the socket's directory \"" + dir +
                      "\": " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode))
    throw ConfigError(c.where(option) + ": \"" + dir + "\" is not a directory");
  if (::access(dir.c_str(), W_OK | X_OK) != 0)
    throw ConfigError(c.where(option) + ": cannot create the socket in \"" + dir +
                      "\": " + std::strerror(errno));
  if (::lstat(path.c_str(), &st) == 0 && !S_ISSOCK(st.st_mode))
    throw ConfigError(c.where(option) + ": \"" + path +
                      "\" exists and is not a socket; refusing to replace it");
}

void check_address(const Config& c, const char* option, const std::string& text) {
  ListenAddress a;
  std::string why;
  if (!parse_listen_address(text, a, why)) return; // the parser has refused it already
  if (a.kind == ListenAddress::Kind::Unix && a.path.find('/') != std::string::npos)
    check_unix_path(c, option, a.path);
  if (a.kind == ListenAddress::Kind::Tcp && geteuid() != 0) {
    std::ifstream in("/proc/sys/net/ipv4/ip_unprivileged_port_start");
    unsigned first = 1024;
    in >> first;
    if (a.port != 0 && a.port < first)
      throw ConfigError(c.where(option) + ": port " + std::to_string(a.port) +
                        " is below net.ipv4.ip_unprivileged_port_start (" + std::to_string(first) +
                        "): only root may bind it");
  }
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

// --capture-crashes: the workers write there, as their own user.
void check_capture_dir(const Config& c) {
  if (c.capture_dir.empty()) return;
  check_directory(c, "capture-crashes", c.capture_dir);
  const std::optional<Credentials> found = workers_user(c);
  if (!found) return; // said by the checks of --user and --group
  const Credentials& who = *found;
  struct stat st {};
  ::stat(c.capture_dir.c_str(), &st);
  bool ok = who.change ? permitted_by(st, who, W_OK | X_OK)
                       : ::access(c.capture_dir.c_str(), W_OK | X_OK) == 0;
  if (!ok)
    throw ConfigError(c.where("capture-crashes") + ": \"" + c.capture_dir +
                      "\" is not a directory the workers' user (" +
                      (who.change ? who.run_as : std::string("the user running fcgi-host")) +
                      ") may write");
}

// --sandbox: the paths are there (Landlock opens each one), and the kernel has every layer
// asked for, or the operator said best-effort.
void check_sandbox(const Config& c) {
  for (const char* name : {"sandbox-read", "sandbox-write"})
    for (const std::string& p : name[8] == 'r' ? c.sandbox_read : c.sandbox_write)
      if (::access(p.c_str(), F_OK) != 0)
        throw ConfigError(c.where(name) + ": \"" + p + "\": " + std::strerror(errno));
  if (!c.script_root.empty()) {
    check_directory(c, "script-root", c.script_root);
    check_workers_reach(c, "script-root", "the script root", c.script_root, R_OK | X_OK);
  }
  const SandboxSettings settings = sandbox_settings(c);
  std::string missing = sandbox_unsupported(settings);
  if (missing.empty() || settings.mode == SandboxMode::BestEffort) return;
  throw ConfigError(c.where(settings.enabled() ? "sandbox" : "private-tmp") + ": " + missing +
                    (settings.enabled() ? "; --sandbox best-effort runs with what it has" : ""));
}

// A plugin: the workers load the private copy the master makes in a directory under $TMPDIR
// (or /tmp; /dev/shm with --private-tmp, app_source.cpp): they must reach that directory.
void check_plugin_copy_root(const Config& c) {
  if (!c.exec.empty() || !looks_like_path(c.app)) return;
  const char* tmpdir = std::getenv("TMPDIR");
  const std::string root =
      c.private_tmp ? "/dev/shm" : (tmpdir && *tmpdir == '/' ? tmpdir : "/tmp");
  check_workers_reach(c, "app", "the directory the plugin is copied to for them (" + root + ")",
                      root, X_OK);
}

// memory-max and cpu-weight are a pool's cgroup, which the master of the pools makes: one
// application has its service's cgroup (systemd's MemoryMax=, CPUWeight=).
void check_cgroup_options(const Config& config) {
  if (!config.pool.empty() || !config.wants_cgroup()) return;
  throw ConfigError(config.where(config.memory_max ? "memory-max" : "cpu-weight") +
                    ": a pool option (a [NAME] section of --config); for one application, "
                    "systemd's MemoryMax= and CPUWeight= set its service's cgroup");
}

// setrlimit and setpriority as start makes them (process_limits.cpp): above the hard limit, or
// a nice below the current one, only root may go; RLIMIT_NOFILE never above fs.nr_open.
void check_process_limits(const Config& c) {
  const bool root = geteuid() == 0;
  auto check = [&](const char* option, int resource, const std::optional<unsigned long long>& v) {
    if (!v) return;
    rlimit now{};
    ::getrlimit(resource, &now);
    const rlim_t want = *v == Config::kUnlimited ? RLIM_INFINITY : static_cast<rlim_t>(*v);
    if (!root && now.rlim_max != RLIM_INFINITY && (want == RLIM_INFINITY || want > now.rlim_max))
      throw ConfigError(c.where(option) + ": " + std::to_string(*v) + " is above the hard limit " +
                        std::to_string(now.rlim_max) + ", which only root may raise");
  };
  check("rlimit-files", RLIMIT_NOFILE, c.rlimit_files);
  check("rlimit-core", RLIMIT_CORE, c.rlimit_core);
  if (c.rlimit_files) {
    std::ifstream in("/proc/sys/fs/nr_open");
    unsigned long long nr_open = 0;
    if (in >> nr_open && (*c.rlimit_files == Config::kUnlimited || *c.rlimit_files > nr_open))
      throw ConfigError(c.where("rlimit-files") + ": above fs.nr_open (" + std::to_string(nr_open) +
                        "), the most the kernel allows");
  }
  errno = 0;
  const int nice_now = ::getpriority(PRIO_PROCESS, 0);
  if (c.nice && !root && errno == 0 && *c.nice < nice_now)
    throw ConfigError(c.where("nice") + ": " + std::to_string(*c.nice) +
                      " is below the current nice value " + std::to_string(nice_now) +
                      ", which only root may do");
}

// The socket's owner and group are set by chown: only root gives a file away.
void check_socket_ownership(const Config& c) {
  if (geteuid() == 0 || c.listen.kind != ListenAddress::Kind::Unix) return;
  if (!c.socket_owner.empty())
    if (const passwd* pw = getpwnam(c.socket_owner.c_str()); pw && pw->pw_uid != geteuid())
      throw ConfigError(c.where("socket-owner") +
                        ": fcgi-host must be started as root to give the socket to \"" +
                        c.socket_owner + "\"");
}

// Every check, in the order start meets what it checks; --test-config and start run this one
// list (run.cpp: read_config, and each pool's ApplicationCheck).
struct StartCheck {
  const char* what;
  void (*run)(const Config&);
};
constexpr StartCheck kStartChecks[] = {
    {"user, group, socket-owner and socket-group exist; root to change user", check_privileges},
    {"memory-max and cpu-weight only in a pool", check_cgroup_options},
    {"rlimit-files, rlimit-core and nice can be set", check_process_limits},
    {"the socket can be given to socket-owner", check_socket_ownership},
    {"chdir is a directory",
     [](const Config& c) {
       if (!c.chdir.empty()) check_directory(c, "chdir", c.chdir);
     }},
    {"the exec program is an executable file the workers' user can reach", check_program},
    {"the workers' user can reach the directory of the plugin's private copy",
     check_plugin_copy_root},
    {"listen, status-listen and health-listen resolve; a Unix socket's directory exists and is "
     "writable, and no other kind of file is at its path",
     [](const Config& c) {
       if (c.listen.kind != ListenAddress::Kind::Inherited)
         check_address(c, "listen", c.listen.to_string());
       if (!c.status_listen.empty()) check_address(c, "status-listen", c.status_listen);
       if (!c.health_listen.empty()) check_address(c, "health-listen", c.health_listen);
     }},
    {"error-log, access-log and pidfile can be written",
     [](const Config& c) {
       check_writable_file(c, "error-log", c.error_log);
       check_writable_file(c, "access-log", c.access_log);
       check_writable_file(c, "pidfile", c.pidfile);
     }},
    {"capture-crashes is a directory the workers' user may write", check_capture_dir},
    {"sandbox-read and sandbox-write exist, script-root is a directory the workers' user can "
     "reach; the kernel has what sandbox and private-tmp need",
     check_sandbox},
};

} // namespace

void check_before_start(const Config& config) {
  for (const StartCheck& check : kStartChecks)
    check.run(config);
}

namespace {

// --private-tmp gives the workers a /tmp of the pool's own: a path the configuration names under
// the machine's /tmp is not there for them (a database the handler opens, a write-list entry).
void say_hidden_by_private_tmp(const Config& c, std::vector<std::string>& said) {
  if (!c.private_tmp) return;
  auto look = [&](const char* option, const std::string& path) {
    if (path == "/tmp" || path.starts_with("/tmp/"))
      said.push_back(c.where(option) + ": \"" + path + "\" is under /tmp, which --private-tmp on " +
                     "replaces with the pool's own, empty /tmp: the workers never see this " +
                     "path; put it elsewhere (/var/lib/APP, /run/APP)");
  };
  for (const std::string& p : c.sandbox_read)
    look("sandbox-read", p);
  for (const std::string& p : c.sandbox_write)
    look("sandbox-write", p);
  look("script-root", c.script_root);
  look("capture-crashes", c.capture_dir);
  look("chdir", c.chdir);
}

} // namespace

std::vector<std::string> risky_settings(const Config& config) {
  std::vector<std::string> said;
  say_hidden_by_private_tmp(config, said);
  const Credentials workers = credentials(config);
  if (::geteuid() == 0 && !workers.run_as.empty() && workers.uid == 0)
    said.push_back("workers run as root (user = root): a flaw in the application is a flaw "
                   "with every privilege; give them a user of their own");
  else if (::geteuid() == 0 && !workers.run_as.empty() && workers.gid == 0)
    said.push_back("workers run with group root (group = root): they can read and write what "
                   "root's group may (root-group files, /etc/shadow's group on some systems); "
                   "give them a group of their own");
  // A config file is how a host is deployed; `--app echo` on a command line is a trial.
  if (config.exec.empty() && config.app == "echo" && !config.config_file.empty())
    said.push_back("app echo is the built-in test app: it shows every request's cookies and "
                   "Authorization header back, and crashes on /crash; not for production");
  return said;
}

namespace {

// Whether a server accepts connections at `a` now (a TCP address on every interface is tried on
// the loopback).
bool someone_listens(const ListenAddress& a) {
  if (a.kind == ListenAddress::Kind::Unix) {
    sockaddr_un sun{};
    if (a.path.size() >= sizeof sun.sun_path) return false;
    sun.sun_family = AF_UNIX;
    std::memcpy(sun.sun_path, a.path.c_str(), a.path.size() + 1);
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const bool yes = fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&sun), sizeof sun) == 0;
    if (fd >= 0) ::close(fd);
    return yes;
  }
  if (a.kind != ListenAddress::Kind::Tcp) return false;
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (::getaddrinfo(a.host.empty() ? "localhost" : a.host.c_str(), std::to_string(a.port).c_str(),
                    &hints, &found) != 0)
    return false;
  bool yes = false;
  for (addrinfo* ai = found; ai && !yes; ai = ai->ai_next) {
    const int fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    yes = fd >= 0 && ::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0;
    if (fd >= 0) ::close(fd);
  }
  ::freeaddrinfo(found);
  return yes;
}

} // namespace

std::vector<std::string> addresses_in_use(const Config& config) {
  std::vector<std::string> notes;
  auto look = [&](const char* option, const std::string& text) {
    ListenAddress a;
    std::string why;
    if (parse_listen_address(text, a, why) && someone_listens(a))
      notes.push_back(config.where(option) + ": a server listens on " + a.to_string() +
                      " now: a start would be refused while it runs (a reload or an upgrade "
                      "of that server keeps its socket)");
  };
  if (config.listen.kind != ListenAddress::Kind::Inherited)
    look("listen", config.listen.to_string());
  if (!config.status_listen.empty()) look("status-listen", config.status_listen);
  if (!config.health_listen.empty()) look("health-listen", config.health_listen);
  return notes;
}

void check_pools_master(const Config& config) {
  if (!config.status_listen.empty()) check_address(config, "status-listen", config.status_listen);
  // Each pool's master answers for its pool: one port for all would say "ready" for none.
  if (!config.health_listen.empty())
    throw ConfigError(config.where("health-listen") +
                      ": before the first section; give each pool its own health-listen in "
                      "its section");
}

std::vector<std::string> start_check_list() {
  std::vector<std::string> list;
  for (const StartCheck& check : kStartChecks)
    list.emplace_back(check.what);
  return list;
}

} // namespace fcgi_host
