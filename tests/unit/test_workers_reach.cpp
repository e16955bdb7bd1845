// What the workers' user may do with a file by its mode bits (cli/workers_reach.cpp), as the
// kernel decides: the owner's bits for the owner, the group's for a member, the others' else;
// root passes every check but running a file no one may execute.
#include "fcgi_host/cli/workers_reach.hpp"

#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

using fcgi_host::Credentials;
using fcgi_host::permitted_by;

namespace {

struct stat node_with(mode_t mode, uid_t uid, gid_t gid) {
  struct stat st {};
  st.st_mode = mode;
  st.st_uid = uid;
  st.st_gid = gid;
  return st;
}

Credentials reach_user(uid_t uid, gid_t gid) {
  Credentials c;
  c.change = true;
  c.uid = uid;
  c.gid = gid; // no user name: its own group only
  return c;
}

} // namespace

TEST_SUITE("workers reach") {
  TEST_CASE("a 0700 directory of root stops another user, a 0711 one lets it search") {
    const Credentials nobody = reach_user(65534, 65534);
    CHECK_FALSE(permitted_by(node_with(S_IFDIR | 0700, 0, 0), nobody, X_OK));
    CHECK(permitted_by(node_with(S_IFDIR | 0711, 0, 0), nobody, X_OK));
    CHECK_FALSE(permitted_by(node_with(S_IFDIR | 0711, 0, 0), nobody, R_OK | X_OK));
  }

  TEST_CASE("the owner's bits for the owner, the group's for its group, even when others have "
            "more") {
    const Credentials app = reach_user(1000, 1000);
    CHECK(permitted_by(node_with(S_IFREG | 0700, 1000, 0), app, X_OK));
    CHECK_FALSE(permitted_by(node_with(S_IFREG | 0077, 1000, 0), app, R_OK)); // as the kernel does
    CHECK(permitted_by(node_with(S_IFREG | 0050, 0, 1000), app, R_OK | X_OK));
    CHECK_FALSE(permitted_by(node_with(S_IFREG | 0705, 0, 1000), app, R_OK));
    CHECK(permitted_by(node_with(S_IFDIR | 0773, 0, 0), app, W_OK | X_OK));
  }

  TEST_CASE("root may read and search anything, run only what someone may run") {
    const Credentials root = reach_user(0, 0);
    CHECK(permitted_by(node_with(S_IFDIR | 0000, 1000, 1000), root, R_OK | X_OK));
    CHECK(permitted_by(node_with(S_IFREG | 0100, 1000, 1000), root, X_OK));
    CHECK_FALSE(permitted_by(node_with(S_IFREG | 0644, 1000, 1000), root, X_OK));
  }
}
