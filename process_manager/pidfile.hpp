#pragma once
// The master's pidfile, owned for the life of the object, and locked (flock) all that time: the
// lock, not the pid written in the file, says whether a master runs. A pid can name a zombie or
// a recycled pid; the lock goes away with the process that held it, the moment it exits.
#include <string>
#include <sys/types.h>

namespace process_manager {

class Pidfile {
public:
  // Opens (creating) `path`, takes the lock without waiting, and writes our pid. Throws
  // std::system_error naming the path and, when the lock is held, the holder's pid (EWOULDBLOCK):
  // the file is then left exactly as it was.
  explicit Pidfile(std::string path);
  // Takes over the locked descriptor of an old master that exec'd us (binary upgrade): the lock
  // is the same open file, shared until the old master exits. Writes our pid.
  Pidfile(std::string path, int inherited_fd);
  // Removes the file if it is still the one we locked and holds our pid (an upgraded master may
  // have taken it over), then drops the lock.
  ~Pidfile();
  Pidfile(const Pidfile&) = delete;
  Pidfile& operator=(const Pidfile&) = delete;

  const std::string& path() const { return path_; }
  // After a failed upgrade: our pid again, in the file we locked, or (if the failed master
  // removed it) in a new file locked under the same descriptor number. Throws like the
  // constructor.
  void reclaim();
  // The locked descriptor (close-on-exec): a worker must close it, or it keeps the lock alive
  // after the master is gone; a binary upgrade hands it to the new master.
  int fd() const { return fd_; }

  // The pid in `path`, or 0 when there is none (missing, empty, not a number).
  static pid_t read(const std::string& path);

private:
  void write_pid();

  std::string path_;
  pid_t pid_;
  int fd_ = -1;
};

} // namespace process_manager
