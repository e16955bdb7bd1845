#include "fcgi_host/net/client_filter.hpp"

#include <arpa/inet.h>
#include <cstring>
#include <netinet/in.h>
#include <utility>

namespace fcgi_host {
namespace {

// Parses "addr" or "addr/prefix" into a 16-byte address and a prefix over 128 bits.
bool parse_pattern(const std::string& pattern, std::array<std::uint8_t, 16>& address,
                   unsigned& prefix, std::string& why) {
  std::string host = pattern;
  long bits = -1;
  if (auto slash = pattern.find('/'); slash != std::string::npos) {
    host = pattern.substr(0, slash);
    std::string rest = pattern.substr(slash + 1);
    if (rest.empty() || rest.size() > 3 ||
        rest.find_first_not_of("0123456789") != std::string::npos) {
      why = "has a prefix length that is not a number";
      return false;
    }
    bits = std::stol(rest);
  }
  in_addr v4{};
  in6_addr v6{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) {
    if (bits > 32) {
      why = "has an IPv4 prefix longer than 32";
      return false;
    }
    address.fill(0);
    address[10] = address[11] = 0xff;
    std::memcpy(address.data() + 12, &v4, 4);
    prefix = 96 + static_cast<unsigned>(bits < 0 ? 32 : bits);
    return true;
  }
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) {
    if (bits > 128) {
      why = "has an IPv6 prefix longer than 128";
      return false;
    }
    std::memcpy(address.data(), &v6, 16);
    prefix = static_cast<unsigned>(bits < 0 ? 128 : bits);
    return true;
  }
  why = "is not an IPv4 or IPv6 address or CIDR block";
  return false;
}

bool prefix_matches(const std::array<std::uint8_t, 16>& a, const std::array<std::uint8_t, 16>& b,
                    unsigned prefix) {
  unsigned full = prefix / 8, rest = prefix % 8;
  if (std::memcmp(a.data(), b.data(), full) != 0) return false;
  if (rest == 0) return true;
  std::uint8_t mask = static_cast<std::uint8_t>(0xff << (8 - rest));
  return (a[full] & mask) == (b[full] & mask);
}

} // namespace

bool valid_client_pattern(const std::string& pattern, std::string& why) {
  if (pattern == kUnixClientsToken) return true;
  std::array<std::uint8_t, 16> address;
  unsigned prefix;
  return parse_pattern(pattern, address, prefix, why);
}

bool parse_client_list(const std::string& list, std::vector<std::string>& patterns,
                       std::string& why) {
  std::vector<std::string> out;
  std::string item;
  for (char c : list + ",") {
    if (c != ',' && c != ' ' && c != '\t') {
      item += c;
      continue;
    }
    if (item.empty()) continue;
    std::string reason;
    if (!valid_client_pattern(item, reason)) {
      why = "'" + item + "' " + reason;
      return false;
    }
    out.push_back(std::exchange(item, {}));
  }
  if (out.empty()) {
    why = "the list is empty, which would allow everyone; name at least one address, or leave "
          "the option out";
    return false;
  }
  patterns = std::move(out);
  return true;
}

ClientFilter::ClientFilter(const std::vector<std::string>& patterns) {
  for (const std::string& p : patterns) {
    if (p == kUnixClientsToken) {
      allows_unix_ = true;
      continue;
    }
    Rule r;
    std::string why;
    if (parse_pattern(p, r.address, r.prefix, why)) rules_.push_back(r);
  }
}

bool ClientFilter::allows(const sockaddr* peer) const {
  if (allows_everyone() || peer->sa_family == AF_UNIX) return true;
  std::array<std::uint8_t, 16> address{};
  if (peer->sa_family == AF_INET) {
    address[10] = address[11] = 0xff;
    std::memcpy(address.data() + 12, &reinterpret_cast<const sockaddr_in*>(peer)->sin_addr, 4);
  } else if (peer->sa_family == AF_INET6) {
    std::memcpy(address.data(), &reinterpret_cast<const sockaddr_in6*>(peer)->sin6_addr, 16);
  } else {
    return false;
  }
  for (const Rule& r : rules_)
    if (prefix_matches(address, r.address, r.prefix)) return true;
  return false;
}

} // namespace fcgi_host
