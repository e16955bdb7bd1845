#include "process_manager/pidfile.hpp"

#include "process_manager/path_checks.hpp"

#include <cerrno>
#include <fcntl.h>
#include <fstream>
#include <sys/file.h>
#include <sys/stat.h>
#include <system_error>
#include <unistd.h>

namespace process_manager {
namespace {

[[noreturn]] void fail(int err, const std::string& what) {
  throw std::system_error(err, std::generic_category(), what);
}

// The open file is still the one the path names (its previous owner may have removed the path
// between our open and our lock).
bool same_file(int fd, const std::string& path) {
  struct stat by_fd {
  }, by_path{};
  return fstat(fd, &by_fd) == 0 && stat(path.c_str(), &by_path) == 0 &&
         by_fd.st_dev == by_path.st_dev && by_fd.st_ino == by_path.st_ino;
}

} // namespace

pid_t Pidfile::read(const std::string& path) {
  std::ifstream in(path);
  long pid = 0;
  if (!(in >> pid) || pid <= 0) return 0;
  return static_cast<pid_t>(pid);
}

namespace {

// An open, locked descriptor on the file `path` names; throws when another process holds it.
int open_locked(const std::string& path) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    // Checked (path_checks.hpp): a pidfile of another user's, or a link, is refused; a pid
    // written there could be one an init script later signals.
    int fd = open_checked(path, O_RDWR | O_CREAT, 0644);
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int err = errno;
      ::close(fd);
      if (err == EWOULDBLOCK)
        fail(err, "pidfile \"" + path + "\" is locked by running process " +
                      std::to_string(Pidfile::read(path)));
      fail(err, "flock(\"" + path + "\") failed");
    }
    if (same_file(fd, path)) return fd;
    ::close(fd);
  }
  fail(EAGAIN, "pidfile \"" + path + "\" keeps being replaced");
}

} // namespace

Pidfile::Pidfile(std::string path)
    : path_(std::move(path)), pid_(getpid()), fd_(open_locked(path_)) {
  write_pid();
}

Pidfile::Pidfile(std::string path, int inherited_fd)
    : path_(std::move(path)), pid_(getpid()), fd_(inherited_fd) {
  ::fcntl(fd_, F_SETFD, FD_CLOEXEC);
  write_pid();
}

// The pid first, then the length: a reader sees the old pid or the new one, never an empty file.
void Pidfile::write_pid() {
  std::string text = std::to_string(pid_) + "\n";
  if (::pwrite(fd_, text.data(), text.size(), 0) != static_cast<ssize_t>(text.size()) ||
      ::ftruncate(fd_, static_cast<off_t>(text.size())) != 0) {
    int err = errno;
    ::close(fd_);
    fail(err, "write(\"" + path_ + "\") failed");
  }
}

void Pidfile::reclaim() {
  if (!same_file(fd_, path_)) {
    int fd = open_locked(path_);
    // The same number: whoever was told our descriptor (the worker spawner) stays right.
    ::dup3(fd, fd_, O_CLOEXEC);
    ::close(fd);
  }
  write_pid();
}

Pidfile::~Pidfile() {
  // getpid() check: a forked child that somehow ran destructors must not remove the master's file.
  if (getpid() == pid_ && same_file(fd_, path_) && read(path_) == pid_) unlink(path_.c_str());
  ::close(fd_);
}

} // namespace process_manager
