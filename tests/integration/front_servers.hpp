#pragma once
// The FastCGI front servers other than nginx that Debian packages: Apache httpd (mod_proxy_fcgi,
// in its ProxyPass and SetHandler forms), lighttpd, Caddy, h2o and HAProxy. Each starts from its
// Debian binary with a private main config (its own temp dir, a free loopback port, its logs
// there) that includes the snippet the project ships in conf/, with the snippet's socket path,
// TCP address and HTTP port replaced: what the tests run is what a user copies.
#include "harness.hpp"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace it {

enum class Front { ApacheProxyPass, ApacheSetHandler, Lighttpd, Caddy, H2o, Haproxy };

std::string front_name(Front front);
// The shipped snippet under conf/ that this server runs.
std::string front_conf_file(Front front);
// Whether its shipped snippet stamps the arrival (X-Request-Start) and a request id (X-Request-Id):
// Apache, Caddy and HAProxy can; lighttpd 1.4 and h2o 2.2 cannot.
bool front_stamps_requests(Front front);
// Whether its Debian binary is installed (a test skips it, with a message, when not).
bool front_installed(Front front);

using TextEdits = std::vector<std::pair<std::string, std::string>>;

// A connection-reuse mode of a front server: its name, its edits to the shipped snippet, and
// whether it keeps its connections to the host between requests.
struct ReuseMode {
  std::string name;
  TextEdits edits;
  bool reuses = false;
};
// The modes a server is run in, the shipped snippet's own first (then the other reuse mode).
const std::vector<ReuseMode>& reuse_modes(Front front);

struct FrontOptions {
  Front front = Front::Lighttpd;
  std::string fastcgi_address; // the host's --listen: "unix:/path" or "127.0.0.1:port"
  // More edits to the shipped snippet, for a connection-reuse mode: every `from` must occur in
  // it (the test and the shipped file cannot drift apart unnoticed).
  TextEdits edits;
};

class FrontServer {
public:
  explicit FrontServer(FrontOptions options);
  ~FrontServer();
  FrontServer(const FrontServer&) = delete;
  FrontServer& operator=(const FrontServer&) = delete;

  int port() const { return port_; }
  // Its error log and output so far.
  std::string log() const;
  // The snippet as it runs (the shipped one with the edits), for a failure message.
  const std::string& snippet() const { return snippet_; }

private:
  TempDir dir_;
  int port_ = 0;
  std::string snippet_;
  std::unique_ptr<ServerProcess> server_;
};

// The web servers drop privileges (Apache always, to www-data; h2o to nobody): the host's socket,
// in its private temp dir, must be reachable by them. The --listen and --socket-mode arguments
// for a host behind a front server, and the call that opens its directory once it runs.
std::vector<std::string> reachable_socket_args();
void open_socket_dir(const HostProcess& host);

} // namespace it
