#pragma once
// The master's pidfile, owned for the life of the object.
#include <string>
#include <sys/types.h>

namespace process_manager {

class Pidfile {
public:
  // Writes our pid atomically (a temporary file in the same directory, then rename(2), so a
  // reader never sees a half-written file). Throws std::system_error naming the path when the
  // file names another live process, or when it cannot be written.
  explicit Pidfile(std::string path);
  // Removes the file if it still holds our pid (a newer master may have taken it over).
  ~Pidfile();
  Pidfile(const Pidfile&) = delete;
  Pidfile& operator=(const Pidfile&) = delete;

  const std::string& path() const { return path_; }

  // The pid in `path`, or 0 when there is none (missing, empty, not a number).
  static pid_t read(const std::string& path);

private:
  std::string path_;
  pid_t pid_;
};

} // namespace process_manager
