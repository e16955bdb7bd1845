#pragma once
// The checks the master makes before it creates or opens a file by a path (its sockets, logs and
// pidfile), as sshd's StrictModes does: started as root, it must not follow a name another user
// can change. A directory is safe when every directory from it up to / is owned by root or by
// the user running fcgi-host, and is writable by nobody else (a group other than root's, or
// everyone), unless it has the sticky bit (as /tmp: there nobody can rename or remove another
// user's entry). A file is safe when it is a
// regular file owned by that user.
#include <string>
#include <sys/stat.h>

namespace process_manager {

// "" when the directory holding `path` (and each one above it) is safe; else why not, naming the
// directory ("directory \"/run/app\" is writable by others (mode 0777)").
std::string unsafe_directory_of(const std::string& path);

// "" when `st` (an open file's fstat) is a regular file owned by this process's user; else why.
std::string unsafe_file(const struct stat& st);

// "" when `st` (a file the master reads its orders from: a config file) is a regular file owned
// by root or this process's user, writable by nobody else (group write only for root's group or
// this process's); else why. A root master runs what such a file says (`user = root`, `exec`).
std::string unsafe_config_file(const struct stat& st);
// The same for a file of root or `owner` (and writable by root's or `owner_group`), asked in a
// process that runs as another user (a mold checks the plugin for its master).
std::string unsafe_config_file(const struct stat& st, uid_t owner, gid_t owner_group);

// open(2) of a file the master writes (a log, the pidfile): O_NOFOLLOW | O_CLOEXEC | O_NOCTTY
// added to `flags`, then checked as above (unsafe_directory_of() first, unsafe_file() on the
// open descriptor). Throws std::system_error naming the path and why; a file that exists but
// is not safe is closed, not written.
int open_checked(const std::string& path, int flags, mode_t mode);

} // namespace process_manager
