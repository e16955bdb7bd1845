#pragma once
// What --listen names: a Unix socket path, a TCP host and port, or (without --listen) a socket
// inherited from the process that started us.
#include <cstdint>
#include <string>
#include <string_view>

namespace fcgi_host {

struct ListenAddress {
  enum class Kind { Inherited, Unix, Tcp };
  Kind kind = Kind::Inherited;
  std::string path; // Unix
  std::string host; // Tcp: "" for every address, an IPv4 literal, an IPv6 literal or a name
  std::uint16_t port = 0;

  std::string to_string() const;
};

// Accepts "unix:/path", "/path", "HOST:PORT", "[IPv6]:PORT", ":PORT". Returns false and sets
// `why` when the text is none of these.
bool parse_listen_address(std::string_view text, ListenAddress& out, std::string& why);

} // namespace fcgi_host
