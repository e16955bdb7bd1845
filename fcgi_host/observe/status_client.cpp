#include "fcgi_host/observe/status_client.hpp"

#include "fcgi_host/net/connect.hpp"
#include "fcgi_host/net/listen_address.hpp"
#include "fcgi_host/observe/status_page.hpp"
#include "fcgi_host/protocol/cgi_head.hpp"
#include "fcgi_host/protocol/client_exchange.hpp"
#include "fcgi_host/protocol/records.hpp"

#include <unistd.h>

namespace fcgi_host {
namespace {

int connect_to(const std::string& text, SteadyClock::time_point deadline) {
  ListenAddress a;
  std::string why;
  if (!parse_listen_address(text, a, why)) throw HostQueryError("--connect: " + why, true);
  ConnectTarget target{a.kind == ListenAddress::Kind::Unix, a.path, std::to_string(a.port)};
  if (!target.is_unix) target.path_or_host = a.host.empty() ? "localhost" : a.host;
  const int fd = connect_before(target, deadline, why);
  if (fd < 0) throw HostQueryError(why, false);
  return fd;
}

std::string encode_request(const HostQuery& q) {
  std::string params;
  auto pair = [&params](std::string_view name, std::string_view value) {
    records::append_name_value(params, name, value);
  };
  const std::string uri = q.path + (q.query.empty() ? "" : "?" + q.query);
  pair("GATEWAY_INTERFACE", "CGI/1.1");
  pair("SERVER_PROTOCOL", "HTTP/1.1");
  pair("REQUEST_METHOD", q.method);
  pair("REQUEST_URI", uri);
  pair("SCRIPT_NAME", q.path);
  pair("DOCUMENT_URI", q.path);
  pair("QUERY_STRING", q.query);
  pair("CONTENT_LENGTH", "");
  if (!q.accept.empty()) pair("HTTP_ACCEPT", q.accept);
  constexpr std::uint16_t id = 1;
  std::string out;
  records::append_begin_request(out, id, records::Role::Responder); // no keep-conn
  records::append_stream(out, records::Type::Params, id, params);
  records::append_stream(out, records::Type::Stdin, id, {});
  return out;
}

HostReply parse_reply(const std::string& cgi) {
  HostReply r;
  cgi::Head head = cgi::parse_head(cgi);
  if (head.status != 0) r.status = head.status;
  for (auto [name, value] : head.headers) {
    if (cgi::same_header_name(name, "Content-Type"))
      r.content_type = value;
    else if (cgi::same_header_name(name, "X-Idle-Workers"))
      r.idle = value;
    else if (cgi::same_header_name(name, "X-Listen-Queue"))
      r.queue = value;
    else if (cgi::same_header_name(name, kHostHeader))
      r.from_host = true;
  }
  r.body = head.body;
  return r;
}

} // namespace

HostReply ask_host(const std::string& address, const HostQuery& query,
                   std::chrono::milliseconds timeout) {
  const auto deadline = SteadyClock::now() + timeout;
  const int fd = connect_to(address, deadline);
  std::string out;
  try {
    out = exchange_stdout(fd, address, encode_request(query), deadline);
  } catch (const ExchangeError& e) {
    ::close(fd);
    throw HostQueryError(e.what(), false);
  }
  ::close(fd);
  HostReply r = parse_reply(out);
  if (!r.from_host)
    throw HostQueryError(address + " answered, but not as fcgi-host (no " +
                             std::string(kHostHeader) +
                             " header): is it the host's --status-listen or --listen address?",
                         false, r.status);
  return r;
}

} // namespace fcgi_host
