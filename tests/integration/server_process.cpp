// ServerProcess: a web server of the tests (nginx, Apache, lighttpd, Caddy, h2o, HAProxy) in its
// own process group, ready once its port accepts, stopped with its own signal, then killed whole.
#include "child_process.hpp"
#include "harness.hpp"

#include <csignal>
#include <unistd.h>

namespace it {

using detail::kill_group_and_reap;
using detail::reap;
using detail::spawn;
using fcgi_test::Error;

ServerProcess::ServerProcess(std::string name, const std::vector<std::string>& argv,
                             const std::string& out_log, const std::string& cwd, int port,
                             int stop_signal, const std::function<std::string()>& describe)
    : stop_signal_(stop_signal) {
  pid_ = spawn(argv, out_log, cwd);
  std::string target = "127.0.0.1:" + std::to_string(port);
  bool ready = wait_for(
      [&] {
        if (!process_alive(pid_)) return true;
        try {
          ::close(fcgi_test::connect_socket(target, Millis{200}));
          return true;
        } catch (const Error&) {
          return false;
        }
      },
      Millis{10000});
  if (!ready || !process_alive(pid_)) {
    std::string why = describe();
    kill_group_and_reap(pid_);
    pid_ = -1;
    throw Error(name + " did not start on " + target + ":\n" + why);
  }
}

ServerProcess::~ServerProcess() {
  if (pid_ <= 0) return;
  ::kill(pid_, stop_signal_);
  if (!reap(pid_, Millis{5000})) kill_group_and_reap(pid_);
  for (pid_t p : pids_in_group(pid_))
    ::kill(p, SIGKILL);
}

} // namespace it
