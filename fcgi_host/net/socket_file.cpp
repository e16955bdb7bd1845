#include "fcgi_host/net/socket_file.hpp"

#include <cstdio>
#include <sys/stat.h>
#include <unistd.h>
#include <utility>

namespace fcgi_host {

SocketFile SocketFile::record(const std::string& path) {
  SocketFile f;
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) return f;
  f.path_ = path;
  f.dev_ = st.st_dev;
  f.ino_ = st.st_ino;
  return f;
}

SocketFile SocketFile::from_text(const std::string& path, const std::string& text) {
  SocketFile f;
  unsigned long long dev = 0, ino = 0;
  int used = 0;
  if (std::sscanf(text.c_str(), "%llu:%llu%n", &dev, &ino, &used) != 2 ||
      static_cast<std::size_t>(used) != text.size())
    return f;
  f.path_ = path;
  f.dev_ = static_cast<dev_t>(dev);
  f.ino_ = static_cast<ino_t>(ino);
  return f;
}

std::string SocketFile::to_text() const {
  return std::to_string(static_cast<unsigned long long>(dev_)) + ":" +
         std::to_string(static_cast<unsigned long long>(ino_));
}

bool SocketFile::remove_if_ours() {
  if (path_.empty()) return false;
  std::string path = std::exchange(path_, {});
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0 || !S_ISSOCK(st.st_mode) || st.st_dev != dev_ ||
      st.st_ino != ino_)
    return false;
  // A window remains between lstat and unlink in which another server could replace the
  // file; POSIX has no unlink-if-inode. It is as short as two system calls.
  return unlink(path.c_str()) == 0;
}

} // namespace fcgi_host
