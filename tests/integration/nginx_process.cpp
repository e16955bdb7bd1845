// NginxProcess: a real nginx on a free loopback port in front of the host under test.
#include "child_process.hpp"
#include "harness.hpp"

#include <csignal>
#include <unistd.h>

namespace it {

using detail::kill_group_and_reap;
using detail::reap;
using detail::spawn;
using fcgi_test::Error;

namespace {

// The http {} block's own lines: temp paths in our directory, the body size, and the upstream
// and location the options ask for (by default: everything to the host, with the stamp the
// queue-time tests read).
std::string http_block(const NginxOptions& o, const std::string& d, int port) {
  std::string addr = o.fastcgi_address;
  if (addr.starts_with("/")) addr = "unix:" + addr;
  std::string upstream = o.upstream, pass = addr, keep;
  if (o.upstream_keepalive > 0) {
    upstream += "  upstream host {\n    server " + addr + ";\n    keepalive " +
                std::to_string(o.upstream_keepalive) + ";\n  }\n";
    pass = "host";
    keep = "      fastcgi_keep_conn on;\n";
  }
  std::string location = o.location;
  if (location.empty())
    location = "      include /etc/nginx/fastcgi_params;\n"
               "      fastcgi_param SCRIPT_NAME $fastcgi_script_name;\n"
               "      fastcgi_param HTTP_X_REQUEST_START \"t=${msec}\";\n"
               "      fastcgi_pass " +
               pass + ";\n" + keep;
  std::string block = "  access_log off;\n";
  for (const char* t : {"client_body", "proxy", "fastcgi", "uwsgi", "scgi"})
    block += std::string("  ") + t + "_temp_path " + d + "/" + t + ";\n";
  block += "  client_max_body_size " + o.client_max_body_size + ";\n" + upstream +
           "  server {\n    listen 127.0.0.1:" + std::to_string(port) +
           ";\n    server_name localhost;\n    location / {\n" + location + "    }\n  }\n";
  return block;
}

} // namespace

NginxProcess::NginxProcess(NginxOptions o) {
  port_ = free_tcp_port();
  const std::string& d = dir_.path();
  // `user root`: nginx started as root would run its worker as www-data, which cannot reach a
  // socket inside our private 0700 temp dir (a 502 "Permission denied" that is no host bug).
  dir_.write("nginx.conf", "daemon off;\nmaster_process on;\nworker_processes 1;\nuser root;\n"
                           "error_log " +
                               d + "/error.log notice;\npid " + d +
                               "/nginx.pid;\n"
                               "events { worker_connections 1024; }\n"
                               "http {\n" +
                               http_block(o, d, port_) + "}\n");
  // -e: the error log before the config is read would otherwise go to /var/log/nginx.
  pid_ = spawn({"/usr/sbin/nginx", "-p", d + "/", "-c", d + "/nginx.conf", "-e", d + "/error.log"},
               dir_.file("nginx.out"), d);
  std::string target = "127.0.0.1:" + std::to_string(port_);
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
    std::string why = read_file(dir_.file("nginx.out")) + error_log();
    kill_group_and_reap(pid_);
    pid_ = -1;
    throw Error("nginx did not start on " + target + ":\n" + why);
  }
}

NginxProcess::~NginxProcess() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGQUIT); // graceful: lets the worker finish and nginx remove its pid file
  if (!reap(pid_, Millis{5000})) kill_group_and_reap(pid_);
  for (pid_t p : pids_in_group(pid_))
    ::kill(p, SIGKILL);
}

std::string NginxProcess::error_log() const {
  return read_file(dir_.file("error.log"));
}

} // namespace it
