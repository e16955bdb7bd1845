#include "fcgi_host/observe/status_server.hpp"

#include "app/response.hpp"
#include "fcgi_host/net/socket_write.hpp"
#include "fcgi_host/observe/status_page.hpp"
#include "fcgi_host/protocol/record_guard.hpp"
#include "process_manager/clock.hpp"
#include "process_manager/log.hpp"

#include <algorithm>
#include <cerrno>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace fcgi_host {

namespace {

using process_manager::LogLevel;

constexpr int kMaxPerCall = 16;                 // connections answered per readiness
constexpr std::size_t kMaxRequestBytes = 32768; // a status request is a few hundred bytes
constexpr std::uint8_t kParams = 4, kStdout = 6;

Config status_socket_config(const Config& config) {
  Config c = config;
  std::string why;
  parse_listen_address(config.status_listen, c.listen, why); // checked by parse_config
  c.backlog = 64;
  return c;
}

std::uint32_t read_be(const char* p, int n) {
  std::uint32_t v = 0;
  for (int i = 0; i < n; ++i)
    v = (v << 8) | static_cast<unsigned char>(p[i]);
  return v;
}

std::size_t read_length(std::string_view& d, bool& ok) {
  if (d.empty()) return ok = false, 0;
  if (static_cast<unsigned char>(d[0]) < 128) {
    std::size_t n = static_cast<unsigned char>(d[0]);
    d.remove_prefix(1);
    return n;
  }
  if (d.size() < 4) return ok = false, 0;
  std::size_t n = read_be(d.data(), 4) & 0x7fffffffu;
  d.remove_prefix(4);
  return n;
}

} // namespace

bool decode_params(std::string_view d,
                   std::vector<std::pair<std::string_view, std::string_view>>& out) {
  while (!d.empty()) {
    bool ok = true;
    std::size_t n = read_length(d, ok);
    std::size_t v = read_length(d, ok);
    if (!ok || n > d.size() || v > d.size() - n) return false;
    out.emplace_back(d.substr(0, n), d.substr(n, v));
    d.remove_prefix(n + v);
  }
  return true;
}

StatusServer::StatusServer(const Config& config, ObservabilitySettings settings, int pool_listen_fd)
    : socket_(std::make_unique<ListenSocket>(status_socket_config(config))),
      settings_(std::move(settings)), pool_listen_fd_(pool_listen_fd) {
  fcntl(fd(), F_SETFL, fcntl(fd(), F_GETFL) | O_NONBLOCK);
}

void StatusServer::serve() {
  client_errors_.flush_due(process_manager::monotonic_ns());
  std::uint64_t deadline =
      process_manager::monotonic_ns() + static_cast<std::uint64_t>(kBudget.count()) * 1'000'000u;
  for (int i = 0; i < kMaxPerCall && process_manager::monotonic_ns() < deadline; ++i) {
    sockaddr_storage peer{};
    socklen_t len = sizeof peer;
    int c = accept4(fd(), reinterpret_cast<sockaddr*>(&peer), &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (c < 0) return; // EAGAIN: nothing more queued
    // --status-allow: TCP peers by address; Unix peers pass (the socket's mode governs them).
    bool allowed = peer.ss_family == AF_UNIX ||
                   settings_.status_allow.allows(reinterpret_cast<sockaddr*>(&peer));
    std::uint64_t own_deadline = process_manager::monotonic_ns() +
                                 static_cast<std::uint64_t>(kPerConnection.count()) * 1'000'000u;
    serve_connection(c, allowed, std::min(deadline, own_deadline));
    ::close(c);
  }
}

void StatusServer::serve_connection(int fd, bool allowed, std::uint64_t deadline) {
  GuardLimits limits;
  limits.max_body = 4096;
  limits.max_params_size = 16384;
  limits.max_params = 200;
  limits.max_records = 1000;
  RecordGuard guard(limits, ServerValues{});
  std::string in(kMaxRequestBytes, '\0');
  std::size_t size = 0;
  std::string out;
  for (;;) {
    RecordGuard::Verdict v = guard.advance(in.data(), size, out);
    if (v == RecordGuard::Verdict::RequestReady) break;
    if (v == RecordGuard::Verdict::Reject) {
      records::append_error_response(out, guard.request_id(), guard.error_status());
      write_all(fd, out.data(), out.size(), 200);
      return;
    }
    if (v == RecordGuard::Verdict::Close || size == in.size()) return;
    std::uint64_t now = process_manager::monotonic_ns();
    if (now >= deadline) {
      client_errors_.write(ClientErrorLog::Kind::Request,
                           "status-listen: request not received in time; connection closed");
      return;
    }
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, static_cast<int>((deadline - now) / 1'000'000 + 1)) <= 0) continue;
    ssize_t n = ::read(fd, in.data() + size, in.size() - size);
    if (n <= 0 && !(n < 0 && (errno == EAGAIN || errno == EINTR))) return;
    if (n > 0) size += static_cast<std::size_t>(n);
  }

  // The PARAMS records of the request, concatenated.
  std::string params;
  for (std::size_t pos = guard.request_begin(); pos + 8 <= guard.request_end();) {
    const char* h = in.data() + pos;
    std::size_t length = read_be(h + 4, 2), padding = static_cast<unsigned char>(h[6]);
    if (static_cast<std::uint8_t>(h[1]) == kParams) params.append(h + 8, length);
    pos += 8 + length + padding;
  }
  std::vector<std::pair<std::string_view, std::string_view>> pairs;
  decode_params(params, pairs); // the guard checked the pair lengths already
  std::string_view uri, document_uri, query;
  bool has_query = false;
  for (auto& [name, value] : pairs) {
    if (name == "REQUEST_URI")
      uri = value;
    else if (name == "DOCUMENT_URI" || name == "SCRIPT_NAME")
      document_uri = value;
    else if (name == "QUERY_STRING")
      query = value, has_query = true;
  }
  std::string_view path = document_uri.empty() ? uri.substr(0, uri.find('?')) : document_uri;
  if (!has_query && uri.find('?') != std::string_view::npos) query = uri.substr(uri.find('?') + 1);

  // Ping on the ping path (default /ping), status on every other path.
  std::string_view ping = settings_.ping_path;
  if (ping.empty()) ping = "/ping";
  EndpointReply reply;
  if (scoreboard_)
    reply = answer_endpoint(path == ping ? Endpoint::Ping : Endpoint::Status, settings_,
                            *scoreboard_, pool_listen_fd_, query, allowed);
  std::string text = "Status: " + std::to_string(reply.status) + " " +
                     std::string(app::reason_phrase(reply.status)) +
                     "\r\nContent-Type: " + reply.content_type + "\r\n";
  for (auto& [name, value] : reply.headers)
    text += name + ": " + value + "\r\n";
  text += "Content-Length: " + std::to_string(reply.body.size()) + "\r\n\r\n" + reply.body;
  std::uint16_t id = guard.request_id();
  for (std::size_t pos = 0; pos < text.size();) {
    std::size_t n = std::min<std::size_t>(text.size() - pos, 65528);
    records::append_header(out, kStdout, id, n);
    out.append(text, pos, n);
    pos += n;
  }
  records::append_header(out, kStdout, id, 0);
  records::append_end_request(out, id, 0, 0);
  std::uint64_t now = process_manager::monotonic_ns();
  int left_ms = now < deadline ? static_cast<int>((deadline - now) / 1'000'000 + 1) : 1;
  if (!write_all(fd, out.data(), out.size(), left_ms))
    client_errors_.write(ClientErrorLog::Kind::Connection,
                         "status-listen: client did not read the answer in time");
}

} // namespace fcgi_host
