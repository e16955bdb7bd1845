#pragma once
// The private copy of a plugin file that one generation's workers load. The master copies the
// bytes (it reads them, it never maps them) into a directory of its own, readable by the
// workers' group only: a worker respawned for an old generation loads the code its generation
// started with, and a `cp` over the operator's file changes no page any process runs. The copy
// is removed when the last generation that names it is gone.
#include <memory>
#include <string>
#include <sys/stat.h>
#include <sys/types.h>

namespace fcgi_host {

// A directory made with mkdtemp() under $TMPDIR (or /tmp), named after the master that owns it
// ("fcgi-host-plugins.<pid>.XXXXXX"): mode 0710, its group the workers' (they may open a file
// they are told the name of, not list or change it). Removed with what is left in it by the
// process that made it; one left by a master that was killed is removed by the next master
// that makes one in the same place (sweep_dead_plugin_directories).
class PluginDirectory {
public:
  // Throws StartupError naming the call. `workers_gid`: -1 for the master's own group.
  // `root`: where to make it; "" for $TMPDIR or /tmp.
  explicit PluginDirectory(gid_t workers_gid, const std::string& root = "");
  ~PluginDirectory();
  PluginDirectory(const PluginDirectory&) = delete;
  PluginDirectory& operator=(const PluginDirectory&) = delete;

  const std::string& path() const { return path_; }
  gid_t workers_gid() const { return gid_; }
  const std::string& root() const { return root_; }
  // A fresh name in it for a copy of `source` ("3-libtodo.so").
  std::string next_name(const std::string& source);

private:
  std::string path_;
  gid_t gid_;
  std::string root_;
  pid_t owner_;
  unsigned copies_ = 0;
};

// Removes from `root` ("" for $TMPDIR or /tmp) the plugin directories of masters that are gone:
// only ones named "fcgi-host-plugins.<pid>.*" whose pid no longer runs, that are directories
// (never a symlink followed) and owned by this process's user; a master sweeping at the same
// moment holds the directory's flock and is left to it. The entries are unlinked through the
// directory's descriptor, so a name swapped meanwhile is never followed. Returns how many were
// removed. (A master whose pid this namespace cannot see counts as gone: masters in different
// pid namespaces need different TMPDIRs, as they have in containers.)
int sweep_dead_plugin_directories(const std::string& root);

// What a file was when it was copied: a later stat() that differs means it changed on disk.
struct FileIdentity {
  dev_t dev = 0;
  ino_t ino = 0;
  off_t size = 0;
  timespec mtime{};
  bool operator==(const FileIdentity& o) const {
    return dev == o.dev && ino == o.ino && size == o.size && mtime.tv_sec == o.mtime.tv_sec &&
           mtime.tv_nsec == o.mtime.tv_nsec;
  }
};
// The identity of `path` now; nullopt-like: dev 0 and ino 0 when it cannot be stat()ed.
FileIdentity identity_of(const std::string& path);

class PluginCopy {
public:
  // Copies `source` (a regular file; its symlinks followed, as dlopen() would) into `dir`.
  // Throws StartupError naming the file and the call.
  PluginCopy(std::shared_ptr<PluginDirectory> dir, const std::string& source);
  ~PluginCopy(); // unlinks the copy (in the process that made it)
  PluginCopy(const PluginCopy&) = delete;
  PluginCopy& operator=(const PluginCopy&) = delete;

  const std::string& path() const { return path_; }     // the copy
  const std::string& source() const { return source_; } // the operator's file
  const FileIdentity& copied() const { return copied_; }
  // The operator's file is no longer what was copied (rebuilt, rewritten in place, removed).
  bool source_changed() const { return !(identity_of(source_) == copied_); }

private:
  std::shared_ptr<PluginDirectory> dir_; // removed after its last copy
  std::string path_;
  std::string source_;
  FileIdentity copied_;
  pid_t owner_;
};

} // namespace fcgi_host
