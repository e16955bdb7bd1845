#include "fcgi_host/runners/plugin_copy.hpp"

#include "fcgi_host/net/listen_socket.hpp" // StartupError
#include "fcgi_host/sys_error.hpp"

#include <cstdlib>
#include <fcntl.h>
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

// Copies what `from` holds into `to`; false with errno on a failed read or write.
bool copy_bytes(int from, int to, const std::string& from_name, const std::string& to_name,
                std::string& why) {
  char buffer[64 * 1024];
  for (;;) {
    ssize_t n = ::read(from, buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return why = sys_error("read", from_name), false;
    if (n == 0) return true;
    for (ssize_t done = 0; done < n;) {
      ssize_t w = ::write(to, buffer + done, static_cast<std::size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) return why = sys_error("write", to_name), false;
      done += w;
    }
  }
}

} // namespace

PluginDirectory::PluginDirectory(gid_t workers_gid, const std::string& root)
    : gid_(workers_gid), root_(root), owner_(::getpid()) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = (!root.empty() ? root : std::string(tmp && *tmp == '/' ? tmp : "/tmp")) +
                        "/fcgi-host-plugins.XXXXXX";
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

PluginCopy::PluginCopy(std::shared_ptr<PluginDirectory> dir, const std::string& source)
    : dir_(std::move(dir)), source_(source), owner_(::getpid()) {
  Fd from{::open(source.c_str(), O_RDONLY | O_CLOEXEC)};
  if (from.fd < 0) throw StartupError(sys_error("open", source));
  struct stat st {};
  if (::fstat(from.fd, &st) != 0) throw StartupError(sys_error("fstat", source));
  if (!S_ISREG(st.st_mode)) throw StartupError("\"" + source + "\" is not a regular file");
  copied_ = identity(st);
  path_ = dir_->next_name(source);
  // A fresh file, never one planted under the name: O_EXCL, and no symlink followed.
  Fd to{::open(path_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0400)};
  if (to.fd < 0) throw StartupError(sys_error("open", path_));
  std::string why;
  bool ok = copy_bytes(from.fd, to.fd, source, path_, why);
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
