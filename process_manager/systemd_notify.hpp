#pragma once
// systemd's notify protocol without libsystemd: one datagram per state change to the Unix socket
// named by $NOTIFY_SOCKET (a path, or an abstract name starting with '@'). With no NOTIFY_SOCKET
// every call is a no-op, so the master calls it unconditionally.
//
//  READY=1                       the first generation serves; again after a reload completed
//  RELOADING=1 + MONOTONIC_USEC  HUP received (systemd's Type=notify-reload contract)
//  STOPPING=1                    TERM/QUIT/INT received
//  WATCHDOG=1                    every WATCHDOG_USEC/2 when the unit sets WatchdogSec=
//  MAINPID=N + READY=1           sent by the old master after a binary upgrade (USR2), while it
//                                is still the main pid: systemd then follows the new master
#include <cstdint>
#include <string_view>
#include <sys/socket.h>
#include <sys/un.h>

namespace process_manager {

class SystemdNotifier {
public:
  // Reads NOTIFY_SOCKET, WATCHDOG_USEC and WATCHDOG_PID from the environment.
  SystemdNotifier();
  ~SystemdNotifier();
  SystemdNotifier(const SystemdNotifier&) = delete;
  SystemdNotifier& operator=(const SystemdNotifier&) = delete;

  bool enabled() const { return fd_ >= 0; }
  // Sends `state` (newline-separated assignments). Failures are ignored: systemd is optional.
  void notify(std::string_view state) const;
  // "RELOADING=1\nMONOTONIC_USEC=<now>"
  void reloading() const;
  // Sends WATCHDOG=1 when half the watchdog interval has passed since the last one.
  void watchdog(std::uint64_t now_ns);

private:
  int fd_ = -1;
  sockaddr_un addr_{};
  socklen_t addr_len_ = 0;
  std::uint64_t watchdog_interval_ns_ = 0; // half of WATCHDOG_USEC; 0: off
  std::uint64_t last_watchdog_ns_ = 0;
};

} // namespace process_manager
