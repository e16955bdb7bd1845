#pragma once
// --watch: tells when a set of files has changed and settled, for a master that then reloads.
// inotify watches each file's directory, not the file: a build that renames its output over the
// path, an editor that deletes and creates, and a `cp` that rewrites in place all show there,
// and a file that is replaced stays watched. A change settles once nothing has happened to the
// files for `settle` and no writer still has one open (a half-written file is not a change yet;
// a writer that holds it longer than kLongestWrite is given up on).
#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace process_manager {

class FileWatch {
public:
  // Throws std::runtime_error naming the call (inotify_init1, timerfd_create).
  explicit FileWatch(std::chrono::milliseconds settle);
  ~FileWatch();
  FileWatch(const FileWatch&) = delete;
  FileWatch& operator=(const FileWatch&) = delete;

  // The files to watch (absolute or relative to the current directory); replaces the last set.
  // Returns a line per directory that cannot be watched (empty: all are).
  std::vector<std::string> watch(const std::vector<std::string>& files);

  // What the owner's loop waits on: both readable at times.
  int inotify_fd() const { return inotify_; }
  int timer_fd() const { return timer_; }
  // Called when one of the two is readable. Returns the first file that changed, once the
  // changes have settled.
  std::optional<std::string> on_readable(int fd);

  static constexpr std::chrono::seconds kLongestWrite{30};

private:
  struct Dir {
    int wd;
    std::string path;
    std::vector<std::string> names; // of the watched files in it
  };
  void read_events();
  void arm(std::chrono::milliseconds in);

  std::chrono::milliseconds settle_;
  int inotify_ = -1;
  int timer_ = -1;
  std::vector<Dir> dirs_;
  std::string changed_;              // the first file that changed since the last report
  std::vector<std::string> writing_; // opened for writing, not closed yet
  std::chrono::steady_clock::time_point first_change_{};
};

} // namespace process_manager
