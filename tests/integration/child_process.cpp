#include "child_process.hpp"

#include "fcgi_host/testing/fcgi_test_client.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace it::detail {

pid_t spawn(const std::vector<std::string>& argv, const std::string& log, const std::string& cwd) {
  std::vector<char*> cargv;
  for (const auto& a : argv)
    cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) throw fcgi_test::Error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0); // one group per spawned server: the destructor can kill it whole
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    int in = ::open("/dev/null", O_RDONLY);
    int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (in < 0 || out < 0 || ::chdir(cwd.c_str()) != 0) ::_exit(126);
    ::dup2(in, 0); // never a socket: without --listen the host would take fd 0 as its socket
    ::dup2(out, 1);
    ::dup2(out, 2);
    ::execv(cargv[0], cargv.data());
    std::string msg = std::string("exec ") + cargv[0] + ": " + std::strerror(errno) + "\n";
    (void)!::write(2, msg.data(), msg.size());
    ::_exit(127);
  }
  ::setpgid(pid, pid); // also here, so the group exists whichever side runs first
  return pid;
}

std::optional<int> reap(pid_t pid, Millis timeout) {
  return test_wait::wait_child_exit(pid, timeout);
}

void kill_group_and_reap(pid_t pid) {
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGKILL);
  reap(pid, Millis{5000});
}

} // namespace it::detail
