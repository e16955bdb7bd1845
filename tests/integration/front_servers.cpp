#include "front_servers.hpp"

#include <csignal>
#include <sys/stat.h>
#include <unistd.h>

#ifndef FCGI_HOST_SOURCE_DIR
#define FCGI_HOST_SOURCE_DIR "."
#endif

namespace it {
namespace {

// The socket every shipped snippet names (its port is 8080), and the tests replace.
constexpr const char* kShippedSocket = "/run/fcgi-host/fcgi-host.sock";

// One front server: its binary, its snippet, where the snippet names the FastCGI address (the
// Unix form, and what replaces it for TCP) and the HTTP port, its main config and command line.
struct Spec {
  const char* name;
  const char* binary;
  const char* conf; // under conf/
  const char* unix_form;
  const char* tcp_form; // "{addr}": 127.0.0.1:PORT of the host, "{port}": its port alone
  TextEdits port_edits; // "{port}": the server's HTTP port
  int stop_signal;
  // The main config, in `dir`, including `snippet` (already written as `dir`/site.conf).
  std::string (*main_config)(const std::string& dir);
  // The command line, given the directory.
  std::vector<std::string> (*argv)(const std::string& dir);
};

std::string apache_main(const std::string& d) {
  std::string modules;
  for (const char* m :
       {"mpm_event", "authz_core", "headers", "setenvif", "unique_id", "proxy", "proxy_fcgi"})
    modules +=
        "LoadModule " + std::string(m) + "_module /usr/lib/apache2/modules/mod_" + m + ".so\n";
  // Apache refuses to run its children as root: they run as www-data.
  return "ServerRoot " + d + "\nDefaultRuntimeDir " + d + "\nPidFile " + d +
         "/httpd.pid\nMutex file:" + d + " default\nErrorLog " + d +
         "/error.log\nLogLevel warn\nServerName localhost\nUser www-data\nGroup www-data\n" +
         modules +
         "StartServers 1\nServerLimit 1\nThreadsPerChild 16\nMaxRequestWorkers 16\nMinSpareThreads "
         "1\n"
         "MaxSpareThreads 16\n"
         "Include " +
         d + "/site.conf\n";
}

std::string lighttpd_main(const std::string& d) {
  return "server.document-root = \"" + d + "\"\nserver.errorlog = \"" + d +
         "/error.log\"\nserver.bind = \"127.0.0.1\"\nserver.upload-dirs = ( \"" + d +
         "\" )\ninclude \"" + d + "/site.conf\"\n";
}

std::string caddy_main(const std::string& d) {
  return "{\n  admin off\n  auto_https off\n  default_bind 127.0.0.1\n"
         "  storage file_system " +
         d + "/data\n}\nimport " + d + "/site.conf\n";
}

// YAML has no include that h2o 2.2 reads at the top level: the snippet follows the header.
std::string h2o_main(const std::string& d) {
  return "user: root\npid-file: " + d + "/h2o.pid\nerror-log: " + d +
         "/error.log\nnum-threads: 1\n" + read_file(d + "/site.conf");
}

std::string haproxy_main(const std::string&) {
  return "global\n  log stdout format raw local0\n"
         "defaults\n  mode http\n  log global\n  option httplog\n  timeout connect 5s\n"
         "  timeout client 30s\n  timeout server 30s\n";
}

const Spec& spec(Front front) {
  static const Spec apache_proxypass{
      "Apache ProxyPass",
      "/usr/sbin/apache2",
      "apache-fcgi-host.conf",
      "unix:/run/fcgi-host/fcgi-host.sock|fcgi://localhost/",
      "fcgi://{addr}/",
      {{"Listen 8080", "Listen 127.0.0.1:{port}"}, {"*:8080", "*:{port}"}},
      SIGTERM,
      apache_main,
      [](const std::string& d) {
        return std::vector<std::string>{"/usr/sbin/apache2", "-f", d + "/main.conf",
                                        "-DFOREGROUND"};
      }};
  static const Spec apache_sethandler{"Apache SetHandler",
                                      apache_proxypass.binary,
                                      "apache-fcgi-host-sethandler.conf",
                                      "proxy:unix:/run/fcgi-host/fcgi-host.sock|fcgi://localhost",
                                      "proxy:fcgi://{addr}",
                                      apache_proxypass.port_edits,
                                      SIGTERM,
                                      apache_main,
                                      apache_proxypass.argv};
  static const Spec lighttpd{
      "lighttpd",
      "/usr/sbin/lighttpd",
      "lighttpd-fcgi-host.conf",
      "\"socket\" => \"/run/fcgi-host/fcgi-host.sock\"",
      "\"host\" => \"127.0.0.1\", \"port\" => {port}",
      {{"server.port = 8080", "server.port = {port}"}},
      SIGTERM,
      lighttpd_main,
      [](const std::string& d) {
        return std::vector<std::string>{"/usr/sbin/lighttpd", "-D", "-f", d + "/main.conf"};
      }};
  static const Spec caddy{"Caddy",
                          "/usr/bin/caddy",
                          "Caddyfile.fcgi-host",
                          "unix//run/fcgi-host/fcgi-host.sock",
                          "{addr}",
                          {{":8080 {", ":{port} {"}},
                          SIGQUIT, // TERM waits for its grace period; QUIT stops at once
                          caddy_main,
                          [](const std::string& d) {
                            // Caddy keeps state under $HOME and $XDG_*: the temp dir, not root's
                            // home.
                            return std::vector<std::string>{
                                "/usr/bin/env",       "HOME=" + d,      "XDG_CONFIG_HOME=" + d,
                                "XDG_DATA_HOME=" + d, "/usr/bin/caddy", "run",
                                "--adapter",          "caddyfile",      "--config",
                                d + "/main.conf"};
                          }};
  static const Spec h2o{"h2o",
                        "/usr/bin/h2o",
                        "h2o-fcgi-host.conf",
                        "port: /run/fcgi-host/fcgi-host.sock\n          type: unix",
                        "host: 127.0.0.1\n          port: {port}\n          type: tcp",
                        {{"listen: 8080", "listen:\n  host: 127.0.0.1\n  port: {port}"}},
                        SIGTERM,
                        h2o_main,
                        [](const std::string& d) {
                          return std::vector<std::string>{"/usr/bin/h2o", "-c", d + "/main.conf"};
                        }};
  static const Spec haproxy{"HAProxy",
                            "/usr/sbin/haproxy",
                            "haproxy-fcgi-host.cfg",
                            "/run/fcgi-host/fcgi-host.sock proto fcgi",
                            "{addr} proto fcgi",
                            {{"bind 127.0.0.1:8080", "bind 127.0.0.1:{port}"}},
                            SIGTERM,
                            haproxy_main,
                            [](const std::string& d) {
                              return std::vector<std::string>{
                                  "/usr/sbin/haproxy", "-db", "-f",
                                  d + "/main.conf",    "-f",  d + "/site.conf"};
                            }};
  switch (front) {
  case Front::ApacheProxyPass:
    return apache_proxypass;
  case Front::ApacheSetHandler:
    return apache_sethandler;
  case Front::Lighttpd:
    return lighttpd;
  case Front::Caddy:
    return caddy;
  case Front::H2o:
    return h2o;
  case Front::Haproxy:
    break;
  }
  return haproxy;
}

// Replaces every `from` of `edits` (after putting `values` into `to`); throws when one is not in
// the text: the shipped file changed under the test.
std::string apply(std::string text, const TextEdits& edits, const TextEdits& values,
                  const std::string& what) {
  for (auto [from, to] : edits) {
    if (text.find(from) == std::string::npos)
      throw fcgi_test::Error(what + " no longer holds \"" + from + "\"");
    for (const auto& [name, value] : values)
      to = replace_all(to, name, value);
    text = replace_all(text, from, to);
  }
  return text;
}

} // namespace

std::string front_name(Front front) {
  return spec(front).name;
}

std::string front_conf_file(Front front) {
  return std::string(FCGI_HOST_SOURCE_DIR) + "/conf/" + spec(front).conf;
}

bool front_stamps_requests(Front front) {
  return front != Front::Lighttpd && front != Front::H2o;
}

bool front_installed(Front front) {
  return ::access(spec(front).binary, X_OK) == 0;
}

FrontServer::FrontServer(FrontOptions o) {
  const Spec& s = spec(o.front);
  const std::string& d = dir_.path();
  ::chmod(d.c_str(), 0755); // its children may run as another user
  port_ = free_tcp_port();
  const std::string shipped = front_conf_file(o.front);
  snippet_ = read_file(shipped);
  if (snippet_.empty()) throw fcgi_test::Error("cannot read " + shipped);
  TextEdits values{{"{port}", std::to_string(port_)}};
  snippet_ = apply(snippet_, s.port_edits, values, shipped);
  snippet_ = apply(snippet_, o.edits, values, shipped);
  if (o.fastcgi_address.starts_with("unix:")) {
    snippet_ = apply(snippet_, {{kShippedSocket, o.fastcgi_address.substr(5)}}, {}, shipped);
  } else {
    std::string host_port = o.fastcgi_address.substr(o.fastcgi_address.rfind(':') + 1);
    snippet_ = apply(snippet_, {{s.unix_form, s.tcp_form}},
                     {{"{addr}", o.fastcgi_address}, {"{port}", host_port}}, shipped);
  }
  dir_.write("site.conf", snippet_);
  dir_.write("main.conf", s.main_config(d));
  server_ = std::make_unique<ServerProcess>(
      s.name, s.argv(d), dir_.file("out.log"), d, port_, s.stop_signal,
      [this] { return log() + "\nits snippet:\n" + snippet_; });
}

FrontServer::~FrontServer() = default;

std::string FrontServer::log() const {
  return read_file(dir_.file("out.log")) + read_file(dir_.file("error.log"));
}

std::vector<std::string> reachable_socket_args() {
  return {"--socket-mode", "0666"};
}

void open_socket_dir(const HostProcess& host) {
  ::chmod(host.dir().path().c_str(), 0711); // others may pass through, not list
}

const std::vector<ReuseMode>& reuse_modes(Front front) {
  static const std::vector<ReuseMode> none{{"one connection per request", {}}};
  static const std::vector<ReuseMode> apache{
      {"enablereuse=on", {}, true}, {"enablereuse=off", {{"enablereuse=on", "enablereuse=off"}}}};
  static const std::vector<ReuseMode> h2o{
      {"keepalive", {}, true},
      {"no keepalive", {{"fastcgi.timeout.keepalive: 10000", "fastcgi.timeout.keepalive: 0"}}}};
  static const std::vector<ReuseMode> haproxy{
      {"keep-conn", {}, true},
      {"no keep-conn", {{"    option keep-conn", "    no option keep-conn"}}},
      {"keep-conn, get-values", {{"no option get-values", "option get-values"}}, true},
      {"keep-conn, mpxs-conns, get-values",
       {{"no option get-values", "option get-values"},
        {"no option mpxs-conns", "option mpxs-conns"}},
       true}};
  switch (front) {
  case Front::ApacheProxyPass:
    return apache;
  case Front::H2o:
    return h2o;
  case Front::Haproxy:
    return haproxy;
  default:
    return none;
  }
}

} // namespace it
