#include "fcgi_host/runners/plugin_copy.hpp"

#include "fcgi_host/sys_error.hpp"
#include "process_manager/path_checks.hpp"

#include <cerrno>
#include <climits>
#include <csignal>
#include <cstdlib>
#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

namespace fcgi_host {

namespace {

// Closes a descriptor on every way out.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

std::string base_name(const std::string& path) {
  auto slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

FileIdentity identity(const struct stat& st) {
  return FileIdentity{st.st_dev, st.st_ino, st.st_size, st.st_mtim};
}

constexpr const char* kPrefix = "fcgi-host-plugins.";

std::string root_or_tmp(const std::string& root) {
  if (!root.empty()) return root;
  const char* tmp = std::getenv("TMPDIR");
  return tmp && *tmp == '/' ? tmp : "/tmp";
}

// The owner's pid in "fcgi-host-plugins.<pid>.XXXXXX"; 0 for any other name.
pid_t owner_in_name(const std::string& name) {
  const std::string prefix = kPrefix;
  if (name.compare(0, prefix.size(), prefix) != 0) return 0;
  pid_t pid = 0;
  std::size_t i = prefix.size();
  for (; i < name.size() && name[i] >= '0' && name[i] <= '9' && pid < 100000000; ++i)
    pid = pid * 10 + (name[i] - '0');
  if (i == prefix.size() || i >= name.size() || name[i] != '.' || name.size() - i - 1 != 6)
    return 0;
  return pid;
}

// Whether the mode of `st` lets a process of `uid` and `gid` read it (its supplementary groups
// aside: a file readable only through one of them is refused, never shown).
bool mode_lets_read(const struct stat& st, uid_t uid, gid_t gid) {
  if (st.st_uid == uid) return (st.st_mode & S_IRUSR) != 0;
  if (st.st_gid == gid) return (st.st_mode & S_IRGRP) != 0;
  return (st.st_mode & S_IROTH) != 0;
}

bool runs(pid_t pid) {
  return ::kill(pid, 0) == 0 || errno != ESRCH;
}

// Unlinks every entry of the directory open at `dir` (the copies: plain files; a subdirectory,
// which a master never makes, stays and keeps the directory).
void unlink_entries(int dir) {
  int listing = ::dup(dir);
  if (listing < 0) return;
  DIR* d = ::fdopendir(listing);
  if (!d) {
    ::close(listing);
    return;
  }
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name != "." && name != "..") ::unlinkat(dir, e->d_name, 0);
  }
  ::closedir(d);
}

} // namespace

int sweep_dead_plugin_directories(const std::string& root) {
  const std::string where = root_or_tmp(root);
  Fd parent{::open(where.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC)};
  if (parent.fd < 0) return 0;
  int listing = ::dup(parent.fd);
  DIR* d = listing < 0 ? nullptr : ::fdopendir(listing);
  if (!d) {
    if (listing >= 0) ::close(listing);
    return 0;
  }
  int removed = 0;
  while (dirent* e = ::readdir(d)) {
    const pid_t pid = owner_in_name(e->d_name);
    if (pid <= 0 || pid == ::getpid() || runs(pid)) continue;
    // A symlink planted under the name is not followed; someone else's directory is not ours.
    Fd dir{::openat(parent.fd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)};
    struct stat st {};
    if (dir.fd < 0 || ::fstat(dir.fd, &st) != 0 || st.st_uid != ::geteuid()) continue;
    // Two masters starting at once: one sweeps, the other passes by.
    if (::flock(dir.fd, LOCK_EX | LOCK_NB) != 0) continue;
    unlink_entries(dir.fd);
    if (::unlinkat(parent.fd, e->d_name, AT_REMOVEDIR) == 0) ++removed;
  }
  ::closedir(d);
  return removed;
}

PluginDirectory::PluginDirectory(gid_t workers_gid, const std::string& root, uid_t workers_uid)
    : gid_(workers_gid), uid_(workers_uid), root_(root), owner_(::getpid()) {
  const std::string where = root_or_tmp(root);
  // Checked as a log's directory: nobody but root and this user may rename entries in it.
  if (std::string why = process_manager::unsafe_directory_of(where + "/"); !why.empty())
    throw StartupError("the plugin copies' directory " + where +
                       (root.empty() ? " ($TMPDIR or /tmp)" : "") + " refused: " + why);
  sweep_dead_plugin_directories(root);
  std::string pattern = where + "/" + kPrefix + std::to_string(owner_) + ".XXXXXX";
  if (!::mkdtemp(pattern.data())) throw StartupError(sys_error("mkdtemp", pattern));
  path_ = pattern;
  // 0710 root:workers: a worker opens the name it is given; nobody else may look in.
  if (gid_ != static_cast<gid_t>(-1) && ::chown(path_.c_str(), static_cast<uid_t>(-1), gid_) != 0) {
    std::string why = sys_error("chown", path_);
    ::rmdir(path_.c_str());
    throw StartupError(why);
  }
  if (::chmod(path_.c_str(), gid_ == static_cast<gid_t>(-1) ? 0700 : 0710) != 0) {
    std::string why = sys_error("chmod", path_);
    ::rmdir(path_.c_str());
    throw StartupError(why);
  }
}

PluginDirectory::~PluginDirectory() {
  if (::getpid() != owner_) return; // a forked child's copy of the object
  // Copies still named by a generation are removed by their PluginCopy; this takes the rest.
  ::rmdir(path_.c_str());
}

std::string PluginDirectory::next_name(const std::string& source) {
  return path_ + "/" + std::to_string(++copies_) + "-" + base_name(source);
}

FileIdentity identity_of(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {};
  return identity(st);
}

bool copy_plugin_bytes(int from, int to, const std::string& from_name, const std::string& to_name,
                       std::string& why) {
  char buffer[64 * 1024];
  for (off_t total = 0;;) {
    ssize_t n = ::read(from, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return why = sys_error("read", from_name), false;
    if (n == 0) return true;
    if ((total += n) > kMaxPluginBytes)
      return why = "\"" + from_name + "\" grew past " + std::to_string(kMaxPluginBytes >> 20) +
                   " MiB while it was copied",
             false;
    for (ssize_t done = 0; done < n;) {
      ssize_t w = ::write(to, buffer + done, static_cast<std::size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return why = sys_error("write", to_name), false;
      done += w;
    }
  }
}

std::string unsafe_plugin_source(const struct stat& st, uid_t workers_uid, gid_t workers_gid) {
  return unsafe_plugin_source(st, workers_uid, workers_gid, ::geteuid(), ::getegid());
}

std::string unsafe_plugin_source(const struct stat& st, uid_t workers_uid, gid_t workers_gid,
                                 uid_t master_uid, gid_t master_gid) {
  if (std::string why = process_manager::unsafe_config_file(st, master_uid, master_gid);
      !why.empty())
    return why;
  if (st.st_size > kMaxPluginBytes)
    return "larger than " + std::to_string(kMaxPluginBytes >> 20) + " MiB (" +
           std::to_string(st.st_size) + " bytes)";
  if (workers_uid != static_cast<uid_t>(-1) && workers_uid != 0 &&
      !mode_lets_read(st, workers_uid, workers_gid))
    return "not readable by the workers' user (uid " + std::to_string(workers_uid) + ", mode " +
           std::to_string((st.st_mode >> 6) & 7) + std::to_string((st.st_mode >> 3) & 7) +
           std::to_string(st.st_mode & 7) + ")";
  return "";
}

PluginCopy::PluginCopy(std::shared_ptr<PluginDirectory> dir, const std::string& source)
    : dir_(std::move(dir)), source_(source), owner_(::getpid()) {
  // The name resolved first (a link of the operator's own, libx.so -> libx.so.1), then opened
  // without following a link and without blocking: a FIFO or a device is refused by its fstat.
  char resolved[PATH_MAX];
  if (!::realpath(source.c_str(), resolved)) throw StartupError(sys_error("realpath", source));
  auto refuse = [&](const std::string& why) {
    return StartupError("plugin \"" + source + "\"" +
                        (source == resolved ? "" : " (\"" + std::string(resolved) + "\")") +
                        " refused: " + why);
  };
  Fd from{::open(resolved, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC)};
  if (from.fd < 0) throw StartupError(sys_error("open", resolved));
  struct stat st {};
  if (::fstat(from.fd, &st) != 0) throw StartupError(sys_error("fstat", resolved));
  if (std::string why = unsafe_plugin_source(st, dir_->workers_uid(), dir_->workers_gid());
      !why.empty())
    throw refuse(why);
  copied_ = identity(st);
  path_ = dir_->next_name(source);
  // A fresh file, never one planted under the name: O_EXCL, and no symlink followed.
  Fd to{::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0400)};
  if (to.fd < 0) throw StartupError(sys_error("open", path_));
  std::string why;
  bool ok = copy_plugin_bytes(from.fd, to.fd, source, path_, why);
  if (ok && dir_->workers_gid() != static_cast<gid_t>(-1) &&
      ::fchown(to.fd, static_cast<uid_t>(-1), dir_->workers_gid()) != 0)
    ok = false, why = sys_error("fchown", path_);
  if (ok && ::fchmod(to.fd, dir_->workers_gid() == static_cast<gid_t>(-1) ? 0400 : 0440) != 0)
    ok = false, why = sys_error("fchmod", path_);
  if (!ok) {
    ::unlink(path_.c_str());
    throw StartupError(why);
  }
}

PluginCopy::~PluginCopy() {
  if (::getpid() == owner_) ::unlink(path_.c_str());
}

} // namespace fcgi_host
