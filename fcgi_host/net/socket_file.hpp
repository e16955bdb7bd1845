#pragma once
// The file a Unix socket was bound to, by device and inode: the one file the host may remove.
// A path is only a name: by the time the host stops, someone may have removed it and bound
// another server there, and that server's socket is not ours to delete.
#include <string>
#include <sys/types.h>

namespace fcgi_host {

class SocketFile {
public:
  SocketFile() = default;
  // What `path` is now (called right after bind()); empty when it cannot be stat'ed.
  static SocketFile record(const std::string& path);
  // From to_text(), for a socket handed over by a binary upgrade; empty when malformed.
  static SocketFile from_text(const std::string& path, const std::string& text);

  bool empty() const { return path_.empty(); }
  const std::string& path() const { return path_; }
  std::string to_text() const; // "DEV:INODE"

  // Removes the path if it is still this file, and forgets it either way (called once, at
  // the start of a stop). False when something else is there now (left alone) or nothing is.
  bool remove_if_ours();
  void forget() { path_.clear(); }

private:
  std::string path_;
  dev_t dev_ = 0;
  ino_t ino_ = 0;
};

} // namespace fcgi_host
