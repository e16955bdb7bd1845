#include "fcgi_host/observe/status_server.hpp"

#include "app/request.hpp"

#include "fcgi_host/net/fd_flags.hpp"
#include "fcgi_host/net/socket_write.hpp"
#include "fcgi_host/observe/serve_queued.hpp"
#include "fcgi_host/observe/status_page.hpp"
#include "fcgi_host/protocol/cgi_head.hpp"
#include "fcgi_host/protocol/record_guard.hpp"
#include "fcgi_host/protocol/request_adapter.hpp"
#include "fcgi_host/protocol/request_decoder.hpp"
#include "fcgi_host/sys_error.hpp"
#include "process_manager/clock.hpp"
#include "process_manager/log.hpp"
#include "process_manager/proc_children.hpp"

#include <algorithm>
#include <sys/socket.h>
#include <unistd.h>

namespace fcgi_host {

namespace {

using process_manager::LogLevel;

constexpr int kMaxPerCall = 16;                 // connections answered per readiness
constexpr std::size_t kMaxRequestBytes = 32768; // a status request is a few hundred bytes

// Control requests change what the master runs: only its own user (or root) may send them, and
// only over the Unix socket, whose peer the kernel names; never a process of the master's own
// tree (its workers, their children), which shares its user when the master is not root (a
// container's one uid): a worker never steers its master.
bool peer_is_owner(int fd) {
  ucred cred{};
  socklen_t len = sizeof cred;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) return false;
  if (cred.uid != 0 && cred.uid != geteuid()) return false;
  return cred.pid <= 0 || !process_manager::descends_from(cred.pid, ::getpid());
}

constexpr std::string_view kControlPrefix = "/control/";

} // namespace

EndpointReply StatusServer::answer(const StatusRequest& q) const {
  if (q.path.starts_with(kControlPrefix)) {
    if (!q.owner)
      return plain_reply(403, "control requests are taken from the master's user over its Unix "
                              "status socket only, never from its workers\n");
    if (q.method != "POST") return plain_reply(405, "control requests are POSTs\n");
    if (!control_) return plain_reply(404, "no control here\n");
    return control_(q.path.substr(kControlPrefix.size()), q.query);
  }
  if (answer_) return answer_(q);
  // Ping on the ping path (default /ping), status on every other path.
  std::string_view ping = settings_.ping_path;
  if (ping.empty()) ping = "/ping";
  if (!scoreboard_) return {};
  return answer_endpoint(q.path == ping ? Endpoint::Ping : Endpoint::Status, settings_,
                         *scoreboard_, pool_listen_fd_, q.query, q.allowed, q.accept, stopping_);
}

StatusServer::StatusServer(const ListenOptions& socket, ObservabilitySettings settings,
                           int pool_listen_fd)
    : StatusServer(std::make_unique<ListenSocket>(socket), std::move(settings), pool_listen_fd) {}

StatusServer::StatusServer(std::unique_ptr<ListenSocket> socket, ObservabilitySettings settings,
                           int pool_listen_fd)
    : socket_(std::move(socket)), settings_(std::move(settings)), pool_listen_fd_(pool_listen_fd) {
  if (!set_nonblocking(fd(), true))
    throw StartupError(sys_error("fcntl(O_NONBLOCK)", description()));
}

void StatusServer::serve() {
  client_errors_.flush_due(process_manager::monotonic_ns());
  serve_queued(
      fd(), {kBudget, kPerConnection, kMaxPerCall},
      [this](int c, const sockaddr_storage& peer, std::uint64_t deadline) {
        // --status-allow: TCP peers by address; Unix peers pass (the socket's mode
        // governs them).
        bool allowed = peer.ss_family == AF_UNIX ||
                       settings_.status_allow.allows(reinterpret_cast<const sockaddr*>(&peer));
        serve_connection(c, allowed, peer.ss_family == AF_UNIX && peer_is_owner(c), deadline);
      });
}

void StatusServer::serve_connection(int fd, bool allowed, bool owner, std::uint64_t deadline) {
  RequestLimits limits;
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
    if (process_manager::monotonic_ns() >= deadline) {
      client_errors_.write(ClientErrorLog::Kind::Request,
                           "status-listen: request not received in time; connection closed");
      return;
    }
    const long n = read_before(fd, in.data() + size, in.size() - size, deadline);
    if (n < 0) return;
    size += static_cast<std::size_t>(n);
  }

  // The request as a worker decodes it, from the guard's framing and scan (app::Request: path,
  // query, method and Accept by the same rules).
  const RequestFraming framing = guard.framing();
  DecodedRequest decoded;
  app::Request request;
  if (!framing.params ||
      decode_guarded_request(in.data() + guard.request_begin(),
                             guard.request_end() - guard.request_begin(), framing,
                             decoded) != DecodeStatus::Whole ||
      !fill_request(decoded, framing, request))
    return; // never: the guard framed these bytes itself
  EndpointReply reply = answer({request.method(), request.path(), request.query(),
                                request.header("Accept"), allowed, owner});
  cgi::HeaderList headers{{"Content-Type", reply.content_type}};
  headers.insert(headers.end(), reply.headers.begin(), reply.headers.end());
  std::string text;
  if (cgi::append_head(text, reply.status, headers, reply.body.size())) {
    text += reply.body;
  } else { // the page's own headers: never, but a forged header is never sent
    text.clear();
    (void)cgi::append_head(text, 500, {{"Content-Type", "text/plain"}}, 22);
    text += "Internal Server Error\n";
  }
  std::uint16_t id = guard.request_id();
  records::append_stream(out, records::Type::Stdout, id, text, records::kMaxAlignedContent);
  records::append_end_request(out, id, 0, records::ProtocolStatus::RequestComplete);
  std::uint64_t now = process_manager::monotonic_ns();
  int left_ms = now < deadline ? static_cast<int>((deadline - now) / 1'000'000 + 1) : 1;
  if (!write_all(fd, out.data(), out.size(), left_ms))
    client_errors_.write(ClientErrorLog::Kind::Connection,
                         "status-listen: client did not read the answer in time");
}

} // namespace fcgi_host
