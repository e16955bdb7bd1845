#include "process_manager/file_watch.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <sys/inotify.h>
#include <sys/timerfd.h>
#include <unistd.h>
#include <utility>

namespace process_manager {

namespace {

constexpr std::uint32_t kEvents =
    IN_CLOSE_WRITE | IN_MOVED_TO | IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_ATTRIB;

std::string failed(const char* call, const std::string& object) {
  return std::string(call) + "(\"" + object + "\") failed: " + std::strerror(errno);
}

void erase(std::vector<std::string>& v, const std::string& s) {
  v.erase(std::remove(v.begin(), v.end(), s), v.end());
}

} // namespace

FileWatch::FileWatch(std::chrono::milliseconds settle) : settle_(settle) {
  inotify_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
  if (inotify_ < 0) throw std::runtime_error(failed("inotify_init1", "watch"));
  timer_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
  if (timer_ < 0) {
    std::string why = failed("timerfd_create", "watch");
    ::close(inotify_);
    throw std::runtime_error(why);
  }
}

FileWatch::~FileWatch() {
  ::close(inotify_);
  ::close(timer_);
}

std::vector<std::string> FileWatch::watch(const std::vector<std::string>& files) {
  for (const Dir& d : dirs_)
    inotify_rm_watch(inotify_, d.wd);
  dirs_.clear();
  std::vector<std::string> refused;
  for (const std::string& file : files) {
    auto slash = file.rfind('/');
    std::string dir = slash == std::string::npos ? "." : slash == 0 ? "/" : file.substr(0, slash);
    std::string name = slash == std::string::npos ? file : file.substr(slash + 1);
    int wd = inotify_add_watch(inotify_, dir.c_str(), kEvents | IN_ONLYDIR);
    if (wd < 0) {
      refused.push_back(failed("inotify_add_watch", dir));
      continue;
    }
    // Two files in one directory share its watch (inotify returns the same descriptor).
    auto it = std::find_if(dirs_.begin(), dirs_.end(), [wd](const Dir& d) { return d.wd == wd; });
    if (it == dirs_.end()) it = dirs_.insert(dirs_.end(), Dir{wd, dir, {}});
    it->names.push_back(name);
  }
  return refused;
}

void FileWatch::arm(std::chrono::milliseconds in) {
  itimerspec when{};
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(in).count();
  when.it_value.tv_sec = ns / 1'000'000'000;
  when.it_value.tv_nsec = std::max<long long>(ns % 1'000'000'000, 1);
  timerfd_settime(timer_, 0, &when, nullptr);
}

void FileWatch::read_events() {
  alignas(inotify_event) char buffer[8192];
  for (;;) {
    ssize_t n = ::read(inotify_, buffer, sizeof buffer);
    if (n <= 0) return; // EAGAIN: all read
    for (char* p = buffer; p < buffer + n;) {
      auto* e = reinterpret_cast<inotify_event*>(p);
      p += sizeof(inotify_event) + e->len;
      auto dir =
          std::find_if(dirs_.begin(), dirs_.end(), [e](const Dir& d) { return d.wd == e->wd; });
      if (dir == dirs_.end() || e->len == 0) continue;
      std::string name = e->name;
      if (std::find(dir->names.begin(), dir->names.end(), name) == dir->names.end()) continue;
      std::string file = dir->path == "." ? name : dir->path + (dir->path == "/" ? "" : "/") + name;
      if (changed_.empty()) {
        changed_ = file;
        first_change_ = std::chrono::steady_clock::now();
      }
      if (e->mask & (IN_CREATE | IN_MODIFY)) {
        if (std::find(writing_.begin(), writing_.end(), file) == writing_.end())
          writing_.push_back(file);
      } else if (e->mask & (IN_CLOSE_WRITE | IN_MOVED_TO | IN_DELETE | IN_MOVED_FROM)) {
        erase(writing_, file);
      }
      arm(settle_); // each event starts the wait again
    }
  }
}

std::optional<std::string> FileWatch::on_readable(int fd) {
  if (fd == inotify_) {
    read_events();
    return std::nullopt;
  }
  if (fd != timer_) return std::nullopt;
  std::uint64_t expirations = 0;
  if (::read(timer_, &expirations, sizeof expirations) <= 0 || changed_.empty())
    return std::nullopt;
  // A writer still has a file open: its content is not whole yet.
  if (!writing_.empty() && std::chrono::steady_clock::now() - first_change_ < kLongestWrite) {
    arm(settle_);
    return std::nullopt;
  }
  writing_.clear();
  return std::exchange(changed_, std::string());
}

} // namespace process_manager
