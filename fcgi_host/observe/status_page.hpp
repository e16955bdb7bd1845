#pragma once
// The status and ping pages: text (default), ?json, ?openmetrics, ?prometheus (the Prometheus
// text format 0.0.4), ?html, each with &full for one entry per worker (the metrics formats always
// have per-worker series, labelled by the worker's slot). Without a format word in the query,
// the Accept header chooses: OpenMetrics, the Prometheus text format or JSON when asked for
// (with q-values, as a Prometheus scrape sends them), else the text page. Served by the workers on
// --status-path / --ping-path, before the handler, and by the master on --status-listen.
#include "app/response.hpp"
#include "fcgi_host/observe/metrics.hpp"

#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fcgi_host {

enum class StatusFormat { Text, Json, OpenMetrics, Prometheus, Html };

struct StatusQuery {
  StatusFormat format = StatusFormat::Text;
  bool full = false;
  bool pool_label = false; // the metrics formats: pool="NAME" on every sample (the health port)
};

// "json", "openmetrics", "prometheus", "html", "full", "text", joined by '&' (php-fpm's
// spelling); a query without a format word takes the one `accept` (an HTTP Accept header) asks
// for.
StatusQuery parse_status_query(std::string_view query, std::string_view accept = {});

// The format an Accept header asks for: the metrics formats and JSON by their media types and
// q-values; anything else (browsers, curl's */*) the text page.
StatusFormat format_from_accept(std::string_view accept);

// Every status and ping answer carries this header, so that `fcgi-host status|ping` can tell the
// host's answer from a page of whatever else listens on the address.
inline constexpr std::string_view kHostHeader = "X-Fcgi-Host";

// The scoreboard as the pages show it: the pool's name and sandbox, the processes' memory.
Snapshot page_snapshot(const ObservabilitySettings& settings,
                       const process_manager::Scoreboard& scoreboard, int listen_fd);

// The page, and its Content-Type.
std::string render_status(const Snapshot& snap, StatusQuery query, std::string& content_type);

struct EndpointReply {
  int status = 200;
  std::string content_type = "text/plain";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;
};

enum class Endpoint { None, Status, Ping };

// Which built-in page a worker answers for this path (None: the handler's).
inline Endpoint worker_endpoint(const ObservabilitySettings& s, std::string_view path) {
  if (!s.status_path.empty() && path == s.status_path) return Endpoint::Status;
  if (!s.ping_path.empty() && path == s.ping_path) return Endpoint::Ping;
  return Endpoint::None;
}

// The reply for a status or ping request; 403 when `allowed` is false. Status replies carry
// X-Idle-Workers and X-Listen-Queue headers, whatever the format, for `fcgi-host status`; every
// reply carries kHostHeader. `accept`: the request's HTTP_ACCEPT param. `stopping`: the host's
// graceful stop has begun, and the ping answers 503 while the requests in flight finish, so that
// a readiness probe takes the host out of its load balancer before its socket goes.
EndpointReply answer_endpoint(Endpoint endpoint, const ObservabilitySettings& settings,
                              const process_manager::Scoreboard& scoreboard, int listen_fd,
                              std::string_view query, bool allowed, std::string_view accept = {},
                              bool stopping = false);

// A plain-text reply carrying kHostHeader (a control answer, an error of the status socket).
EndpointReply plain_reply(int status, std::string body);

// Copies a reply into a handler-style response.
void fill_response(const EndpointReply& reply, app::Response& response);

// --status-allow for a request served by a worker: the HTTP client's address, as the web server
// passes it in REMOTE_ADDR (the FastCGI peer is the web server itself). A REMOTE_ADDR that is not
// an IP address (absent, or a Unix-socket client) passes, as Unix peers do.
bool remote_addr_allowed(const ClientFilter& filter, std::string_view remote_addr);

} // namespace fcgi_host
