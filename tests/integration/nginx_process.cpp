// NginxProcess: a real nginx on a free loopback port in front of the host under test.
#include "child_process.hpp"
#include "harness.hpp"

#include <csignal>
#include <unistd.h>

namespace it {

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
               "      fastcgi_param HTTP_X_REQUEST_ID $request_id;\n"
               "      add_header X-Request-Id $request_id always;\n"
               "      fastcgi_pass " +
               pass + ";\n" + keep;
  std::string more; // one location per {prefix, address}: several pools behind one nginx
  for (const auto& [prefix, address] : o.locations)
    more += "    location " + prefix + " {\n      include /etc/nginx/fastcgi_params;\n" +
            "      fastcgi_pass " + (address.starts_with("/") ? "unix:" + address : address) +
            ";\n    }\n";
  std::string block = "  access_log off;\n";
  for (const char* t : {"client_body", "proxy", "fastcgi", "uwsgi", "scgi"})
    block += std::string("  ") + t + "_temp_path " + d + "/" + t + ";\n";
  block += "  client_max_body_size " + o.client_max_body_size + ";\n" + upstream +
           "  server {\n    listen 127.0.0.1:" + std::to_string(port) +
           ";\n    server_name localhost;\n" + o.server_extra + "    location / {\n" + location +
           "    }\n" + more + "  }\n";
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
  // QUIT: graceful, lets the worker finish and nginx remove its pid file.
  server_ = std::make_unique<ServerProcess>(
      "nginx",
      std::vector<std::string>{"/usr/sbin/nginx", "-p", d + "/", "-c", d + "/nginx.conf", "-e",
                               d + "/error.log"},
      dir_.file("nginx.out"), d, port_, SIGQUIT,
      [this] { return read_file(dir_.file("nginx.out")) + error_log(); });
}

NginxProcess::~NginxProcess() = default;

std::string NginxProcess::error_log() const {
  return read_file(dir_.file("error.log"));
}

} // namespace it
