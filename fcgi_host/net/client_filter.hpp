#pragma once
// --allow-clients and --status-allow: which peer addresses may talk to us. IPv4 and IPv6
// addresses and CIDR blocks; an IPv4-mapped IPv6 peer (::ffff:a.b.c.d, what a dual-stack socket
// reports) matches IPv4 patterns. Unix-socket peers are governed by the socket's permissions and
// always pass. (libfcgi's FCGI_WEB_SERVER_ADDRS only knows exact IPv4 addresses and lets every
// IPv6 peer through.)
#include <array>
#include <cstdint>
#include <string>
#include <sys/socket.h>
#include <vector>

namespace fcgi_host {

bool valid_client_pattern(const std::string& pattern, std::string& why);

class ClientFilter {
public:
  ClientFilter() = default;
  // Patterns already checked by valid_client_pattern().
  explicit ClientFilter(const std::vector<std::string>& patterns);

  bool allows_everyone() const { return rules_.empty(); }
  bool allows(const sockaddr* peer) const;

private:
  struct Rule {
    std::array<std::uint8_t, 16> address{}; // IPv4 as ::ffff:a.b.c.d
    unsigned prefix = 128;
  };
  std::vector<Rule> rules_;
};

} // namespace fcgi_host
