#include "fcgi_host/worker/process_setup.hpp"

#include "fcgi_host/sys_error.hpp"

#include <csignal>
#include <cstdlib>
#include <grp.h>
#include <pwd.h>
#include <sys/prctl.h>
#include <unistd.h>

namespace fcgi_host {

Credentials resolve_credentials(const std::string& user_option, const std::string& group_option) {
  Credentials c;
  bool root = geteuid() == 0;
  if (user_option.empty() && group_option.empty() && !root) return c;
  if (!root) throw StartupError("--user/--group: fcgi-host must be started as root to change user");
  c.change = true;
  c.default_user = user_option.empty();
  const std::string& user = c.default_user ? std::string(kDefaultWorkerUser) : user_option;
  passwd* pw = getpwnam(user.c_str());
  if (!pw)
    throw StartupError(c.default_user ? "started as root without --user, and there is no user \"" +
                                            user + "\" to run workers as; name one with --user"
                                      : "--user: unknown user \"" + user + "\"");
  c.uid = pw->pw_uid;
  c.gid = pw->pw_gid;
  c.user = user;
  if (!group_option.empty()) {
    group* gr = getgrnam(group_option.c_str());
    if (!gr) throw StartupError("--group: unknown group \"" + group_option + "\"");
    c.gid = gr->gr_gid;
  }
  group* gr = getgrgid(c.gid);
  c.run_as = user + ":" + (gr ? std::string(gr->gr_name) : std::to_string(c.gid));
  return c;
}

bool drop_privileges(const Credentials& c) {
  if (!c.change) return true;
  bool groups_ok =
      c.user.empty() ? setgroups(0, nullptr) == 0 : initgroups(c.user.c_str(), c.gid) == 0;
  pid_t master = getppid();
  if (!groups_ok || setgid(c.gid) != 0 || setuid(c.uid) != 0) return false;
  // A change of user clears the parent-death signal (prctl(2)): armed again, or this worker
  // would outlive a master killed with SIGKILL. If the master died in between, give up.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != master) return false;
  // A root that could get its privileges back has not dropped them.
  return c.uid == 0 || (setuid(0) != 0 && geteuid() == c.uid);
}

void apply_environment(bool clear, const std::vector<std::string>& env) {
  if (clear) {
    clearenv();
    // The one variable a cleared environment gets, a fixed value rather than the master's:
    // --exec programs given by name, a handler's popen("convert ...") and a PHP script's
    // exec() find the system's programs, and nothing of who started the master (its PATH may
    // hold that user's own directories) reaches the workers. --env PATH=... replaces it.
    setenv("PATH", kClearedPath, 1);
  }
  for (const std::string& e : env) {
    auto eq = e.find('=');
    setenv(e.substr(0, eq).c_str(), e.substr(eq + 1).c_str(), 1);
  }
}

} // namespace fcgi_host
