#pragma once
// The private copy of a plugin file that one generation's workers load. The master copies the
// bytes (it reads them, it never maps them) into a directory of its own, readable by the
// workers' group only (and only once the source passed its checks, below): a worker respawned for
// an old generation loads the code its generation started with, and a `cp` over the operator's file
// changes no page any process runs. The copy is removed when the last generation that names it is
// gone.
#include <memory>
#include <string>
#include <sys/stat.h>
#include <sys/types.h>

namespace fcgi_host {

// A directory made with mkdtemp() under $TMPDIR (or /tmp), named after the master that owns it
// ("fcgi-host-plugins.<pid>.XXXXXX"): mode 0710, its group the workers' (they may open a file
// they are told the name of, not list or change it). Where it is made is checked as a log's
// directory is (process_manager/path_checks.hpp): a $TMPDIR another user could write (without
// the sticky bit) is refused, since that user could swap the directory under the master. Removed
// with what is left in it by the process that made it; one left by a master that was killed is
// removed by the next master that makes one in the same place (sweep_dead_plugin_directories).
class PluginDirectory {
public:
  // Throws StartupError naming the call. `workers_gid`: -1 for the master's own group.
  // `root`: where to make it; "" for $TMPDIR or /tmp. `workers_uid`: the workers' user when
  // it is not the master's (-1 otherwise), whom a copy may never show more than they can read.
  explicit PluginDirectory(gid_t workers_gid, const std::string& root = "",
                           uid_t workers_uid = static_cast<uid_t>(-1));
  ~PluginDirectory();
  PluginDirectory(const PluginDirectory&) = delete;
  PluginDirectory& operator=(const PluginDirectory&) = delete;

  const std::string& path() const { return path_; }
  gid_t workers_gid() const { return gid_; }
  uid_t workers_uid() const { return uid_; }
  const std::string& root() const { return root_; }
  // A fresh name in it for a copy of `source` ("3-libtodo.so").
  std::string next_name(const std::string& source);

private:
  std::string path_;
  gid_t gid_;
  uid_t uid_;
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

// The largest plugin file copied: a shared library is megabytes; a bigger file (a sparse one
// made to fill the copy directory) is refused before a byte is read.
constexpr off_t kMaxPluginBytes = off_t{256} << 20;

// "" when `st` (the open plugin source's fstat) may be copied for workers of `workers_uid` and
// `workers_gid` (-1: the master's own): a regular file of at most kMaxPluginBytes, owned by root
// or the master's user and writable by nobody else (a config file's rule: the master hands its
// code to the workers), and, for workers of another user, readable by them by its mode (the
// master never shows them a file they could not read: a symlink to /etc/shadow). Else why.
std::string unsafe_plugin_source(const struct stat& st, uid_t workers_uid, gid_t workers_gid);
// The same, asked by a process of another user than the master's (`master_uid`, `master_gid`):
// a mold, which reads the file with the workers' rights (mold_boot.hpp).
std::string unsafe_plugin_source(const struct stat& st, uid_t workers_uid, gid_t workers_gid,
                                 uid_t master_uid, gid_t master_gid);

// Copies what `from` holds into `to`, at most kMaxPluginBytes (a file that grows past it while
// it is read is refused); false with `why` on a failed read or write.
bool copy_plugin_bytes(int from, int to, const std::string& from_name, const std::string& to_name,
                       std::string& why);

class PluginCopy {
public:
  // Copies `source` into `dir`. The source is resolved (realpath: a libx.so -> libx.so.1 link
  // works) and the file it names opened with O_NOFOLLOW | O_NONBLOCK (a FIFO never blocks the
  // master, a link swapped in meanwhile is not followed), checked with fstat before a byte is
  // read (unsafe_plugin_source), copied into a fresh file of mode 0400 that goes to the
  // workers' group only after the check and the copy passed. Throws StartupError naming the
  // file and why, in one line.
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
