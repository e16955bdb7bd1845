#pragma once
// Asking a host's status socket (or its --listen address) for a page or a control, as
// `fcgi-host status|ping|reload|scale` and the master of several pools do: one FastCGI exchange
// (protocol/client_exchange.hpp), and the answer read as the status server writes it.
#include <chrono>
#include <stdexcept>
#include <string>

namespace fcgi_host {

struct HostQuery {
  std::string method = "GET";
  std::string path = "/status";
  std::string query;  // without '?'
  std::string accept; // HTTP_ACCEPT, when not empty
};
struct HostReply {
  bool from_host = false; // the X-Fcgi-Host header was there
  int status = 200;
  std::string content_type;
  std::string idle, queue; // X-Idle-Workers, X-Listen-Queue
  std::string body;
};

// Why no reply: `bad_address` when the address itself cannot be read (a usage error), else the
// host did not answer, or answered as something other than fcgi-host.
class HostQueryError : public std::runtime_error {
public:
  HostQueryError(const std::string& why, bool bad_address, int foreign_status = 0)
      : std::runtime_error(why), bad_address(bad_address), foreign_status(foreign_status) {}
  bool bad_address;
  int foreign_status; // the status of an answer that was not the host's (0: none came)
};

// Connects to `address` (unix:PATH, HOST:PORT, :PORT), asks and reads the answer within
// `timeout`. Throws HostQueryError.
HostReply ask_host(const std::string& address, const HostQuery& query,
                   std::chrono::milliseconds timeout);

} // namespace fcgi_host
