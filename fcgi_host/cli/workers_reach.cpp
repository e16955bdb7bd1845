#include "fcgi_host/cli/workers_reach.hpp"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <grp.h>
#include <pwd.h>
#include <unistd.h>
#include <vector>

namespace fcgi_host {
namespace {

bool in_groups(gid_t gid, const Credentials& who) {
  if (gid == who.gid) return true;
  if (who.user.empty()) return false;
  std::vector<gid_t> groups(64);
  int n = static_cast<int>(groups.size());
  if (getgrouplist(who.user.c_str(), who.gid, groups.data(), &n) < 0) {
    groups.resize(static_cast<std::size_t>(n));
    if (getgrouplist(who.user.c_str(), who.gid, groups.data(), &n) < 0) return false;
  }
  for (int i = 0; i < n; ++i)
    if (groups[static_cast<std::size_t>(i)] == gid) return true;
  return false;
}

std::string owner_name(uid_t uid) {
  const passwd* pw = getpwuid(uid);
  return pw ? pw->pw_name : std::to_string(uid);
}

std::string mode_text(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

const char* rights_text(int need) {
  if (need & X_OK) return need & R_OK ? "read and run" : "run";
  return need & W_OK ? "write" : "read";
}

} // namespace

bool permitted_by(const struct stat& st, const Credentials& who, int need) {
  mode_t bits = 0;
  if (need & R_OK) bits |= 4;
  if (need & W_OK) bits |= 2;
  if (need & X_OK) bits |= 1;
  if (who.uid == 0)
    return !(need & X_OK) || S_ISDIR(st.st_mode) || (st.st_mode & (S_IXUSR | S_IXGRP | S_IXOTH));
  mode_t granted = st.st_uid == who.uid        ? (st.st_mode >> 6) & 7
                   : in_groups(st.st_gid, who) ? (st.st_mode >> 3) & 7
                                               : st.st_mode & 7;
  return (granted & bits) == bits;
}

std::string unreachable_by(const std::string& path, const Credentials& who, int need) {
  const std::string user = who.change ? who.run_as : "the user running fcgi-host";
  if (!who.change) {
    if (::access(path.c_str(), need) == 0) return {};
    return "\"" + path + "\": " + std::strerror(errno) + " (for " + user + ")";
  }
  if (path.empty() || path.front() != '/') return {}; // (a start directory that getcwd lost)
  // Each directory above the file, from the top: the first that refuses the search blocks.
  for (std::size_t slash = path.find('/', 1); slash != std::string::npos;
       slash = path.find('/', slash + 1)) {
    const std::string dir = path.substr(0, slash);
    struct stat st {};
    if (::stat(dir.c_str(), &st) != 0) return "\"" + dir + "\": " + std::strerror(errno);
    if (!permitted_by(st, who, X_OK))
      return "directory \"" + dir + "\" (mode " + mode_text(st.st_mode) + ", owner " +
             owner_name(st.st_uid) + ") does not let " + user + " search it";
  }
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "\"" + path + "\": " + std::strerror(errno);
  if (!permitted_by(st, who, need))
    return "\"" + path + "\" (mode " + mode_text(st.st_mode) + ", owner " + owner_name(st.st_uid) +
           ") does not let " + user + " " + rights_text(need) + " it";
  return {};
}

} // namespace fcgi_host
