#include "process_manager/systemd_notify.hpp"

#include "process_manager/clock.hpp"

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>

namespace process_manager {

SystemdNotifier::SystemdNotifier() {
  const char* path = std::getenv("NOTIFY_SOCKET");
  if (!path || !*path || std::strlen(path) >= sizeof addr_.sun_path) return;
  if (path[0] != '/' && path[0] != '@') return; // only these two forms exist
  addr_.sun_family = AF_UNIX;
  std::size_t len = std::strlen(path);
  std::memcpy(addr_.sun_path, path, len);
  if (path[0] == '@') addr_.sun_path[0] = '\0'; // abstract: the name is not NUL-terminated
  addr_len_ =
      static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len + (path[0] == '@' ? 0 : 1));
  fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);

  // WATCHDOG_PID, when set, names the process the watchdog is meant for.
  const char* usec = std::getenv("WATCHDOG_USEC");
  const char* wpid = std::getenv("WATCHDOG_PID");
  if (usec && (!wpid || std::atol(wpid) == getpid()))
    watchdog_interval_ns_ = std::strtoull(usec, nullptr, 10) * 1000u / 2;
}

SystemdNotifier::~SystemdNotifier() {
  if (fd_ >= 0) ::close(fd_);
}

void SystemdNotifier::notify(std::string_view state) const {
  if (fd_ < 0) return;
  [[maybe_unused]] ssize_t n = ::sendto(fd_, state.data(), state.size(), MSG_NOSIGNAL,
                                        reinterpret_cast<const sockaddr*>(&addr_), addr_len_);
}

void SystemdNotifier::reloading() const {
  notify("RELOADING=1\nMONOTONIC_USEC=" + std::to_string(monotonic_ns() / 1000));
}

void SystemdNotifier::watchdog(std::uint64_t now_ns) {
  if (fd_ < 0 || watchdog_interval_ns_ == 0 || now_ns - last_watchdog_ns_ < watchdog_interval_ns_)
    return;
  last_watchdog_ns_ = now_ns;
  notify("WATCHDOG=1");
}

} // namespace process_manager
