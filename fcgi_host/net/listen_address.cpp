#include "fcgi_host/net/listen_address.hpp"

#include <charconv>
#include <sys/un.h>

namespace fcgi_host {

std::string ListenAddress::to_string() const {
  switch (kind) {
  case Kind::Unix:
    return "unix:" + path;
  case Kind::Tcp:
    if (host.find(':') != std::string::npos) return "[" + host + "]:" + std::to_string(port);
    return (host.empty() ? "*" : host) + ":" + std::to_string(port);
  case Kind::Inherited:
    break;
  }
  return "inherited socket";
}

bool parse_listen_address(std::string_view text, ListenAddress& out, std::string& why) {
  out = ListenAddress{};
  if (text.starts_with("unix:")) text.remove_prefix(5);
  if (text.starts_with("/")) {
    if (text.size() >= sizeof(sockaddr_un::sun_path)) {
      why =
          "socket path longer than " + std::to_string(sizeof(sockaddr_un::sun_path) - 1) + " bytes";
      return false;
    }
    out.kind = ListenAddress::Kind::Unix;
    out.path = std::string(text);
    return true;
  }
  std::string_view host, port;
  if (text.starts_with("[")) {
    auto close = text.find("]:");
    if (close == std::string_view::npos) {
      why = "expected [IPv6]:PORT";
      return false;
    }
    host = text.substr(1, close - 1);
    port = text.substr(close + 2);
  } else {
    auto colon = text.rfind(':');
    if (colon == std::string_view::npos) {
      why = "expected unix:/path, /path, HOST:PORT, [IPv6]:PORT or :PORT";
      return false;
    }
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (host.find(':') != std::string_view::npos) {
      why = "an IPv6 address needs brackets: [IPv6]:PORT";
      return false;
    }
  }
  unsigned value = 0;
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
  if (port.empty() || ec != std::errc{} || end != port.data() + port.size() || value == 0 ||
      value > 65535) {
    why = "port must be a number from 1 to 65535";
    return false;
  }
  out.kind = ListenAddress::Kind::Tcp;
  out.host = std::string(host);
  out.port = static_cast<std::uint16_t>(value);
  return true;
}

} // namespace fcgi_host
