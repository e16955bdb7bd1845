#pragma once
// Every environment variable one fcgi-host process sets for another across exec, in one place:
// a binary upgrade (USR2) hands its fds to the new master, the master of several pools tells
// each pool's master who it is. Each is removed by the process that reads it, so that neither
// workers nor a later upgrade see a stale one. (systemd's LISTEN_PID/LISTEN_FDS: net/
// systemd_socket.hpp.)
namespace fcgi_host::exec_env {

// USR2 of one master (cli/upgrade_handover.hpp): fds left open across exec.
inline constexpr const char* kListenFd = "FCGI_HOST_LISTEN_FD";   // the listening socket
inline constexpr const char* kUpgradeFd = "FCGI_HOST_UPGRADE_FD"; // the ready pipe
inline constexpr const char* kHandoffSendFd = "FCGI_HOST_HANDOFF_SEND_FD";
inline constexpr const char* kHandoffRecvFd = "FCGI_HOST_HANDOFF_RECV_FD";
inline constexpr const char* kStatusFd = "FCGI_HOST_STATUS_FD";     // --status-listen's socket
inline constexpr const char* kSocketFile = "FCGI_HOST_SOCKET_FILE"; // DEV:INODE of its path
inline constexpr const char* kStatusFile = "FCGI_HOST_STATUS_FILE"; // the same, of the status
inline constexpr const char* kHealthFd = "FCGI_HOST_HEALTH_FD";     // --health-listen's socket
inline constexpr const char* kHealthFile = "FCGI_HOST_HEALTH_FILE"; // its DEV:INODE
// Both upgrades: the locked pidfile.
inline constexpr const char* kPidfileFd = "FCGI_HOST_PIDFILE_FD";

// The master of several pools (pools/).
inline constexpr const char* kPoolsHandover = "FCGI_HOST_POOLS_HANDOVER"; // its own USR2
inline constexpr const char* kPoolMaster = "FCGI_HOST_POOL_MASTER";       // its pid, to a pool
inline constexpr const char* kPoolStatusDir = "FCGI_HOST_POOL_STATUS_DIR";
// Its pid, to the new binary's --test-config at USR2 (pools/cgroups.hpp).
inline constexpr const char* kCheckedFor = "FCGI_HOST_CHECKED_FOR";

} // namespace fcgi_host::exec_env
