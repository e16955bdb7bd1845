#include "fcgi_host/observe/health_server.hpp"

#include "app/response.hpp"
#include "fcgi_host/config/version.hpp"
#include "fcgi_host/net/fd_flags.hpp"
#include "fcgi_host/net/socket_write.hpp"
#include "fcgi_host/observe/serve_queued.hpp"
#include "fcgi_host/observe/status_page.hpp"
#include "fcgi_host/sys_error.hpp"
#include "process_manager/clock.hpp"

#include <algorithm>
#include <unistd.h>
#include <utility>

namespace fcgi_host {

Readiness readiness(bool stopping, bool generation_ready, std::int64_t newest_queue_ns,
                    std::uint64_t max_queue_ns) {
  if (stopping) return {false, "stopping\n"};
  if (!generation_ready) return {false, "starting\n"};
  if (max_queue_ns != 0 && newest_queue_ns > 0 &&
      static_cast<std::uint64_t>(newest_queue_ns) > max_queue_ns)
    return {false,
            "queue time " +
                process_manager::seconds_text(static_cast<std::uint64_t>(newest_queue_ns), 3) +
                " over ready-max-queue-time " + process_manager::seconds_text(max_queue_ns, 3) +
                "\n"};
  return {true, "ready\n"};
}

std::int64_t newest_queue_ns(const process_manager::Scoreboard& sb) {
  std::uint64_t newest_start = 0;
  std::int64_t queue = -1;
  for (std::size_t i = 0; i < sb.used(); ++i) {
    const process_manager::WorkerSlot& s = sb.slot(i);
    const process_manager::WorkerState st = s.state.load(std::memory_order_relaxed);
    if (st == process_manager::WorkerState::Free || st == process_manager::WorkerState::Starting)
      continue;
    const std::size_t threads = std::max<std::size_t>(s.thread_count(), 1);
    for (std::size_t t = 0; t < threads; ++t) {
      const process_manager::RequestSlot& r = s.request(t);
      const std::uint64_t start = r.request_start_ns.load(std::memory_order_relaxed);
      if (start > newest_start) {
        newest_start = start;
        queue = r.queue_ns.load(std::memory_order_relaxed);
      }
    }
  }
  return queue;
}

std::string http_response(const HealthReply& reply, bool with_body) {
  std::string out = "HTTP/1.1 " + std::to_string(reply.status) + " ";
  out.append(app::reason_phrase(reply.status)).append("\r\n");
  out.append("Content-Type: ").append(reply.content_type).append("\r\n");
  out.append("Content-Length: ").append(std::to_string(reply.body.size())).append("\r\n");
  if (reply.status == 405) out += "Allow: GET, HEAD\r\n";
  out.append("Cache-Control: no-store\r\nConnection: close\r\n");
  out.append(kHostHeader).append(": ").append(kVersion).append("\r\n\r\n");
  if (with_body) out += reply.body;
  return out;
}

HealthServer::HealthServer(std::unique_ptr<ListenSocket> socket, HealthSettings settings,
                           ObservabilitySettings observability, int pool_listen_fd)
    : socket_(std::move(socket)), settings_(std::move(settings)),
      observability_(std::move(observability)), pool_listen_fd_(pool_listen_fd) {
  if (!set_nonblocking(fd(), true))
    throw StartupError(sys_error("fcntl(O_NONBLOCK)", description()));
}

HealthReply HealthServer::answer(const HealthRequest& q, bool allowed) const {
  if (!allowed) return {403, "text/plain; charset=utf-8", "Forbidden\n"};
  if (q.path == "/livez") return {200, "text/plain; charset=utf-8", "ok\n"};
  if (!scoreboard_) return {503, "text/plain; charset=utf-8", "starting\n"};
  if (q.path == "/readyz") {
    const process_manager::PoolCounters& p = scoreboard_->pool();
    Readiness r = readiness(stopping_, p.ready_generation.load(std::memory_order_relaxed) != 0,
                            settings_.ready_max_queue_ns ? newest_queue_ns(*scoreboard_) : -1,
                            settings_.ready_max_queue_ns);
    return {r.ready ? 200 : 503, "text/plain; charset=utf-8", r.why};
  }
  if (q.path == "/metrics") {
    StatusQuery query;
    query.format = format_from_accept(q.accept) == StatusFormat::OpenMetrics
                       ? StatusFormat::OpenMetrics
                       : StatusFormat::Prometheus;
    query.pool_label = true;
    HealthReply reply;
    reply.body = render_status(page_snapshot(observability_, *scoreboard_, pool_listen_fd_), query,
                               reply.content_type);
    return reply;
  }
  return {404, "text/plain; charset=utf-8", "not found: /livez, /readyz and /metrics are\n"};
}

void HealthServer::serve() {
  client_errors_.flush_due(process_manager::monotonic_ns());
  serve_queued(fd(), {kBudget, kPerConnection},
               [this](int c, const sockaddr_storage& peer, std::uint64_t deadline) {
                 // --health-allow: TCP peers by address; Unix peers pass (the socket's mode
                 // governs them).
                 bool allowed = peer.ss_family == AF_UNIX ||
                                settings_.allow.allows(reinterpret_cast<const sockaddr*>(&peer));
                 serve_connection(c, allowed, deadline);
               });
}

void HealthServer::serve_connection(int fd, bool allowed, std::uint64_t deadline) {
  char in[kMaxHealthHead];
  std::size_t size = 0;
  HealthRequest request;
  for (;;) {
    request = parse_health_request(std::string_view(in, size));
    if (request.verdict != HealthRequest::Verdict::NeedMore) break;
    if (process_manager::monotonic_ns() >= deadline) {
      client_errors_.write(ClientErrorLog::Kind::Request,
                           "health-listen: request not received in time; connection closed");
      return;
    }
    const long n = read_before(fd, in + size, sizeof in - size, deadline);
    if (n < 0) return; // gone
    size += static_cast<std::size_t>(n);
  }
  HealthReply reply;
  if (request.verdict == HealthRequest::Verdict::Bad) {
    client_errors_.write(ClientErrorLog::Kind::Request,
                         "health-listen: refused a request (" + std::string(request.why) + ")");
    reply = {request.status, "text/plain; charset=utf-8", std::string(request.why) + "\n"};
  } else {
    reply = answer(request, allowed);
  }
  const std::string out = http_response(reply, !request.head);
  if (!write_all_until(fd, out.data(), out.size(), deadline))
    client_errors_.write(ClientErrorLog::Kind::Connection,
                         "health-listen: client did not read the answer in time");
}

} // namespace fcgi_host
