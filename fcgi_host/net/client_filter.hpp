#pragma once
// --allow-clients and --status-allow: which peer addresses may talk to us. IPv4 and IPv6
// addresses and CIDR blocks; an IPv4-mapped IPv6 peer (::ffff:a.b.c.d, what a dual-stack socket
// reports) matches IPv4 patterns. A peer connected to a Unix socket is governed by the socket's
// permissions and always passes; the token `unix` stands for clients that came to nginx over a
// Unix socket (REMOTE_ADDR `unix:`, or none at all), which only --status-allow can see.
// Fail closed: an empty list is an error, and an address that does not parse strictly
// (inet_pton: no leading zeros, no zone id) matches nothing. (libfcgi's FCGI_WEB_SERVER_ADDRS only
// knows exact IPv4 addresses and lets every IPv6 peer through.)
#include <array>
#include <cstdint>
#include <string>
#include <sys/socket.h>
#include <vector>

namespace fcgi_host {

// The token for Unix-socket clients in a list.
inline constexpr const char* kUnixClientsToken = "unix";

bool valid_client_pattern(const std::string& pattern, std::string& why);
// Splits a list (commas and/or blanks) into checked patterns. False with `why` (naming the bad
// item) when an item is not a pattern, or when the list names nothing: an empty allow-list
// would allow everyone, the opposite of what its author meant.
bool parse_client_list(const std::string& list, std::vector<std::string>& patterns,
                       std::string& why);

class ClientFilter {
public:
  ClientFilter() = default;
  // Patterns already checked by valid_client_pattern().
  explicit ClientFilter(const std::vector<std::string>& patterns);

  bool allows_everyone() const { return rules_.empty() && !allows_unix_; }
  bool allows(const sockaddr* peer) const;
  // The list holds `unix`.
  bool allows_unix_clients() const { return allows_everyone() || allows_unix_; }

private:
  struct Rule {
    std::array<std::uint8_t, 16> address{}; // IPv4 as ::ffff:a.b.c.d
    unsigned prefix = 128;
  };
  std::vector<Rule> rules_;
  bool allows_unix_ = false;
};

} // namespace fcgi_host
