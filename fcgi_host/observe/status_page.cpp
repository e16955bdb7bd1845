#include "fcgi_host/observe/status_page.hpp"

#include "fcgi_host/config/version.hpp"
#include "fcgi_host/observe/process_memory.hpp"
#include "fcgi_host/observe/status_fields.hpp"
#include "process_manager/clock.hpp"

#include <arpa/inet.h>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <netinet/in.h>
#include <unistd.h>

namespace fcgi_host {

using fcgi_host::kLatencyBoundsNs;
using fcgi_host::kLatencyBuckets;

StatusFormat format_from_accept(std::string_view accept) {
  StatusFormat best = StatusFormat::Text;
  double best_q = 0;
  while (!accept.empty()) {
    std::size_t comma = accept.find(',');
    std::string_view range = accept.substr(0, comma);
    accept.remove_prefix(comma == std::string_view::npos ? accept.size() : comma + 1);
    // "type/subtype;param=value;q=0.5", spaces allowed around the separators.
    auto trim = [](std::string_view v) {
      while (!v.empty() && (v.front() == ' ' || v.front() == '\t'))
        v.remove_prefix(1);
      while (!v.empty() && (v.back() == ' ' || v.back() == '\t'))
        v.remove_suffix(1);
      return v;
    };
    std::string_view type = trim(range.substr(0, range.find(';')));
    double q = 1;
    bool prometheus_version = false;
    for (std::size_t semi = range.find(';'); semi != std::string_view::npos;) {
      std::size_t next = range.find(';', semi + 1);
      std::string_view param = trim(range.substr(semi + 1, next - semi - 1));
      if (param.starts_with("q=")) q = std::atof(std::string(param.substr(2)).c_str());
      if (param == "version=0.0.4") prometheus_version = true;
      semi = next;
    }
    StatusFormat format;
    if (type == "application/openmetrics-text")
      format = StatusFormat::OpenMetrics;
    else if (type == "text/plain" && prometheus_version)
      format = StatusFormat::Prometheus;
    else if (type == "application/json")
      format = StatusFormat::Json;
    else
      continue;
    if (q > best_q) best = format, best_q = q;
  }
  return best;
}

StatusQuery parse_status_query(std::string_view query, std::string_view accept) {
  StatusQuery q;
  bool format_given = false;
  auto set = [&](StatusFormat f) { q.format = f, format_given = true; };
  while (!query.empty()) {
    std::size_t amp = query.find('&');
    std::string_view word = query.substr(0, amp);
    word = word.substr(0, word.find('=')); // "json=1" counts as "json"
    if (word == "json")
      set(StatusFormat::Json);
    else if (word == "openmetrics")
      set(StatusFormat::OpenMetrics);
    else if (word == "prometheus")
      set(StatusFormat::Prometheus);
    else if (word == "html")
      set(StatusFormat::Html);
    else if (word == "text")
      set(StatusFormat::Text);
    else if (word == "full")
      q.full = true;
    if (amp == std::string_view::npos) break;
    query.remove_prefix(amp + 1);
  }
  if (!format_given) q.format = format_from_accept(accept);
  return q;
}

namespace {

std::string num(std::uint64_t v) {
  return std::to_string(v);
}

// Seconds with enough digits for microseconds; OpenMetrics and JSON both read this.
std::string secs(std::uint64_t ns) {
  return process_manager::seconds_number(ns, 6);
}

std::string bound(std::size_t b) {
  if (b >= std::size(kLatencyBoundsNs)) return "+Inf";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", static_cast<double>(kLatencyBoundsNs[b]) / 1e9);
  std::string s = buf;
  if (s.find('.') == std::string::npos && s.find('e') == std::string::npos) s += ".0";
  return s;
}

std::string json_escape(std::string_view in) {
  std::string out;
  for (unsigned char c : in) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += static_cast<char>(c);
    }
  }
  return out;
}

std::string html_escape(std::string_view in) {
  std::string out;
  for (char c : in) {
    switch (c) {
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '&':
      out += "&amp;";
      break;
    case '"':
      out += "&quot;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

// OpenMetrics label values: backslash, double quote and newline escaped.
std::string label_escape(std::string_view in) {
  std::string out;
  for (char c : in) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

// The table's fields of one form, with their values: (key, value as that page shows it).
std::vector<std::pair<std::string, std::string>> page_fields(const Snapshot& s, FieldForm form) {
  std::vector<std::pair<std::string, std::string>> out;
  for (const StatusField& f : status_fields()) {
    if (!(f.forms & form)) continue;
    FieldValue v = f.value(s);
    using K = FieldValue::Kind;
    if (v.kind == K::Absent) continue;
    std::string shown = v.value;
    if (form == kJsonForm && v.kind == K::Unknown)
      shown = "null";
    else if (form == kJsonForm && v.kind == K::Text) // appends: a false -Wrestrict of GCC 12
      shown = std::string("\"").append(json_escape(v.value)).append("\"");
    else if (form == kJsonForm)
      shown = v.value;
    else if (v.kind == K::Unknown || (v.kind == K::Text && v.value.empty()))
      shown = "-";
    else if (f.shown)
      shown = f.shown(s);
    out.emplace_back(std::string(f.key), std::move(shown));
  }
  return out;
}

std::string text_page(const Snapshot& s, bool full) {
  std::string out;
  auto line = [&out](const std::string& k, const std::string& v) {
    out += k + ":";
    out.append(k.size() < 21 ? 21 - k.size() : 1, ' ');
    out += v + "\n";
  };
  for (auto& [k, v] : page_fields(s, kTextForm))
    line(k, v);
  for (auto& [code, n] : s.exits_by_code)
    line("restarts, exit code " + num(code), num(n));
  for (auto& [sig, n] : s.exits_by_signal)
    line("restarts, signal " + num(sig), num(n));
  for (const RouteSnapshot& r : s.routes) {
    out += "\nhandler " + r.name + ": " + num(r.calls) + " calls, " + num(r.errors) + " 5xx, " +
           (r.crashed ? num(r.crashed) + " crashed, " : "") + secs(r.wall_ns) + " s wall, ~" +
           secs(r.cpu_estimate_ns()) + " s cpu";
    if (r.calls) out += ", avg " + secs(r.wall_ns / r.calls) + " s";
    if (r.finished_early)
      out += "; " + num(r.finished_early) + " answered before their handler returned, " +
             secs(r.after_response_ns) + " s after their responses";
  }
  if (!s.routes.empty()) out += "\n";
  if (full) {
    for (const WorkerSnapshot& w : s.workers) {
      out += "\n************************\n";
      line("pid", num(static_cast<std::uint64_t>(w.pid)));
      line("slot", num(w.slot));
      line("generation", num(w.generation));
      line("state", process_manager::to_string(w.state));
      line("requests", num(w.requests));
      line("accepted conn", num(w.accepted));
      line("threads", num(w.threads));
      line("busy threads", num(w.busy_threads));
      line("request duration", num(w.request_duration_ns / 1000)); // µs, as php-fpm
      line("request method", w.method.empty() ? "-" : w.method);
      line("request URI", w.uri.empty() ? "-" : w.uri);
      line("request id", w.request_id.empty() ? "-" : w.request_id);
      line("last request duration", num(w.last_duration_ns / 1000));
      line("last request cpu", num(w.last_cpu_ns / 1000));
      if (w.memory) {
        line("pss bytes", num(w.memory->pss_bytes));
        line("rss bytes", num(w.memory->rss_bytes));
      }
    }
  }
  return out;
}

// {"0.005":n,...,"+Inf":calls}: each bucket counts the requests at or below its bound, as in
// OpenMetrics.
std::string cumulative_buckets_json(const std::array<std::uint64_t, kLatencyBuckets>& buckets) {
  std::string out;
  std::uint64_t cumulative = 0;
  for (std::size_t b = 0; b < kLatencyBuckets; ++b) {
    cumulative += buckets[b];
    out.append(b ? ",\"" : "\"").append(bound(b)).append("\":").append(num(cumulative));
  }
  return out + "}";
}

std::string json_page(const Snapshot& s, bool full) {
  std::string out = "{";
  bool first = true;
  auto field = [&](const std::string& k, const std::string& raw) {
    if (!first) out += ",";
    first = false;
    out.append("\"").append(json_escape(k)).append("\":").append(raw);
  };
  // Appends rather than "literal" + string: GCC 12 warns falsely on that (-Wrestrict, PR105329).
  auto str = [](const std::string& v) {
    std::string q = "\"";
    q.append(json_escape(v)).append("\"");
    return q;
  };
  for (auto& [k, v] : page_fields(s, kJsonForm))
    field(k, v);
  std::string r = "{";
  for (auto& [code, n] : s.exits_by_code)
    r += (r.size() > 1 ? "," : "") + str("exit " + num(code)) + ":" + num(n);
  for (auto& [sig, n] : s.exits_by_signal)
    r += (r.size() > 1 ? "," : "") + str("signal " + num(sig)) + ":" + num(n);
  field("worker restarts by cause", r + "}");
  std::string h = "[";
  for (const RouteSnapshot& rt : s.routes) {
    if (h.size() > 1) h += ",";
    h += "{\"route\":" + str(rt.name) + ",\"calls\":" + num(rt.calls) +
         ",\"5xx\":" + num(rt.errors) + ",\"crashed\":" + num(rt.crashed) +
         ",\"wall seconds\":" + secs(rt.wall_ns) +
         ",\"cpu seconds\":" + secs(rt.cpu_estimate_ns()) +
         ",\"cpu samples\":" + num(rt.cpu_samples) +
         ",\"finished early\":" + num(rt.finished_early) +
         ",\"after response seconds\":" + secs(rt.after_response_ns) + ",\"latency buckets\":{";
    h += cumulative_buckets_json(rt.buckets) + "}";
  }
  field("handlers", h + "]");
  field("queue time", "{\"measured\":" + num(s.queued()) +
                          ",\"sum seconds\":" + secs(s.queue_sum_ns) + ",\"buckets\":{" +
                          cumulative_buckets_json(s.queue_buckets) + "}");
  field("shed",
        "{\"waited too long\":" + num(s.shed_late) + ",\"client gone\":" + num(s.shed_gone) + "}");
  if (full) {
    std::string p = "[";
    for (const WorkerSnapshot& w : s.workers) {
      if (p.size() > 1) p += ",";
      p += "{\"pid\":" + num(static_cast<std::uint64_t>(w.pid)) + ",\"slot\":" + num(w.slot) +
           ",\"generation\":" + num(w.generation) +
           ",\"state\":" + str(process_manager::to_string(w.state)) +
           ",\"requests\":" + num(w.requests) + ",\"accepted conn\":" + num(w.accepted) +
           ",\"threads\":" + num(w.threads) + ",\"busy threads\":" + num(w.busy_threads) +
           ",\"request duration\":" + num(w.request_duration_ns / 1000) +
           ",\"request method\":" + str(w.method) + ",\"request uri\":" + str(w.uri) +
           ",\"request id\":" + str(w.request_id) +
           ",\"last request duration\":" + num(w.last_duration_ns / 1000) +
           ",\"last request cpu\":" + num(w.last_cpu_ns / 1000);
      if (w.memory)
        p += ",\"pss bytes\":" + num(w.memory->pss_bytes) +
             ",\"rss bytes\":" + num(w.memory->rss_bytes);
      p += "}";
    }
    field("processes", p + "]");
  }
  return out + "}\n";
}

// OpenMetrics 1.0 and the Prometheus text format 0.0.4 differ only in how a counter's family is
// named (OpenMetrics: without _total), and in the closing "# EOF" of OpenMetrics.
class MetricsWriter {
public:
  // `pool`: a pool="NAME" label first on every sample (empty: none).
  MetricsWriter(bool openmetrics, std::string_view pool) : openmetrics_(openmetrics) {
    if (!pool.empty()) pool_label_.append("pool=\"").append(label_escape(pool)).append("\"");
  }

  void family(const std::string& name, const char* type, const std::string& help) {
    bool counter = std::string_view(type) == "counter";
    std::string shown = counter && !openmetrics_ ? name + "_total" : name;
    out_ += "# HELP " + shown + " " + help + "\n# TYPE " + shown + " " + type + "\n";
  }
  void sample(const std::string& name, const std::string& labels, const std::string& value,
              const ExemplarSnapshot* exemplar = nullptr) {
    out_ += name;
    if (!pool_label_.empty() || !labels.empty())
      out_.append("{")
          .append(pool_label_)
          .append(!pool_label_.empty() && !labels.empty() ? "," : "")
          .append(labels)
          .append("}");
    out_ += " " + value;
    // Exemplars exist in OpenMetrics only: "# {trace_id="..."} value timestamp".
    if (openmetrics_ && exemplar && !exemplar->id.empty())
      out_ += std::string(" # {") + (exemplar->is_trace ? "trace_id" : "request_id") + "=\"" +
              label_escape(exemplar->id) + "\"} " + secs(exemplar->value_ns) + " " +
              secs(exemplar->unix_ms * 1'000'000u);
    out_ += "\n";
  }
  // One series of a latency histogram: per-bucket counts (not cumulative), written cumulative.
  struct Series {
    std::string labels; // "route=\"/x\"" (may be empty)
    const std::array<std::uint64_t, kLatencyBuckets>* buckets;
    std::uint64_t count;
    std::uint64_t sum_ns;
    const std::array<ExemplarSnapshot, kLatencyBuckets>* exemplars = nullptr;
  };
  void histogram(const std::string& name, const std::string& help,
                 const std::vector<Series>& series) {
    family(name, "histogram", help);
    for (const Series& h : series) {
      std::string sep = h.labels.empty() ? "" : ",";
      std::uint64_t cumulative = 0;
      for (std::size_t b = 0; b < kLatencyBuckets; ++b) {
        cumulative += (*h.buckets)[b];
        sample(name + "_bucket", h.labels + sep + "le=\"" + bound(b) + "\"", num(cumulative),
               h.exemplars ? &(*h.exemplars)[b] : nullptr);
      }
      sample(name + "_count", h.labels, num(h.count));
      sample(name + "_sum", h.labels, secs(h.sum_ns));
    }
  }

  std::string finish() {
    if (openmetrics_) out_ += "# EOF\n";
    return std::move(out_);
  }

private:
  bool openmetrics_;
  std::string pool_label_;
  std::string out_;
};

// The table's metrics: a family's HELP and TYPE before its first row.
void table_metrics(MetricsWriter& w, const Snapshot& s) {
  std::string_view family;
  for (const StatusField& f : status_fields()) {
    if (!(f.forms & kMetricForm)) continue;
    FieldValue v = f.value(s);
    if (v.kind != FieldValue::Kind::Number) continue;
    const std::string name = "fcgihost_" + std::string(f.metric);
    const bool counter = f.kind == MetricKind::Counter;
    if (f.metric != family) w.family(name, counter ? "counter" : "gauge", std::string(f.help));
    family = f.metric;
    w.sample(counter ? name + "_total" : name, std::string(f.labels), v.value);
  }
}

std::string metrics_page(const Snapshot& s, bool openmetrics, std::string_view pool_label) {
  MetricsWriter w(openmetrics, pool_label);
  const std::string p = "fcgihost_";
  table_metrics(w, s);
  w.family(p + "worker_exits", "counter",
           "Worker exits the master did not ask for, by exit code or signal.");
  for (auto& [code, n] : s.exits_by_code)
    w.sample(p + "worker_exits_total", "reason=\"exit\",code=\"" + num(code) + "\"", num(n));
  for (auto& [sig, n] : s.exits_by_signal)
    w.sample(p + "worker_exits_total", "reason=\"signal\",code=\"" + num(sig) + "\"", num(n));

  auto route = [](const RouteSnapshot& r) { return "route=\"" + label_escape(r.name) + "\""; };
  w.family(p + "handler_calls", "counter", "Calls per handler route.");
  for (const RouteSnapshot& r : s.routes)
    w.sample(p + "handler_calls_total", route(r), num(r.calls));
  w.family(p + "handler_errors", "counter", "Responses with a 5xx status per handler route.");
  for (const RouteSnapshot& r : s.routes)
    w.sample(p + "handler_errors_total", route(r), num(r.errors));
  w.family(p + "handler_crashed_requests", "counter",
           "Requests per handler route that their worker died in (not among the calls).");
  for (const RouteSnapshot& r : s.routes)
    w.sample(p + "handler_crashed_requests_total", route(r), num(r.crashed));
  w.family(p + "handler_cpu_seconds", "counter",
           "CPU time per handler route, estimated from 1 request in " + num(kCpuSampleEvery) + ".");
  for (const RouteSnapshot& r : s.routes)
    w.sample(p + "handler_cpu_seconds_total", route(r), secs(r.cpu_estimate_ns()));
  w.family(p + "handler_finished_early", "counter",
           "Calls per handler route whose response went out before the handler returned "
           "(Response::finish()).");
  for (const RouteSnapshot& r : s.routes)
    w.sample(p + "handler_finished_early_total", route(r), num(r.finished_early));
  w.family(p + "handler_after_response_seconds", "counter",
           "Time per handler route spent after the response went out (Response::finish()): the "
           "handler's duration less it is its response time.");
  for (const RouteSnapshot& r : s.routes)
    w.sample(p + "handler_after_response_seconds_total", route(r), secs(r.after_response_ns));
  std::vector<MetricsWriter::Series> durations;
  for (const RouteSnapshot& r : s.routes)
    durations.push_back({route(r), &r.buckets, r.calls, r.wall_ns, &r.exemplars});
  w.histogram(p + "handler_duration_seconds", "Wall time per handler route.", durations);

  w.histogram(
      p + "queue_time_seconds",
      "Arrival at the web server (X-Request-Start) to handler start, stamped requests only.",
      {{"", &s.queue_buckets, s.queued(), s.queue_sum_ns}});

  // Labelled by the slot, which outlives the worker in it: a recycled worker continues the
  // series of its slot instead of starting new ones. The pid is a value of its own.
  auto worker = [](const WorkerSnapshot& x) { return "slot=\"" + num(x.slot) + "\""; };
  w.family(p + "worker_pid", "gauge", "Process id of the worker in the slot.");
  for (const WorkerSnapshot& x : s.workers)
    w.sample(p + "worker_pid", worker(x), num(static_cast<std::uint64_t>(x.pid)));
  w.family(p + "worker_requests", "counter",
           "Requests served by the worker in the slot (a new worker starts again from 0).");
  for (const WorkerSnapshot& x : s.workers)
    w.sample(p + "worker_requests_total", worker(x), num(x.requests));
  w.family(p + "worker_active", "gauge", "1 while the worker serves a request.");
  for (const WorkerSnapshot& x : s.workers)
    w.sample(p + "worker_active", worker(x), x.active ? "1" : "0");
  w.family(p + "worker_busy_threads", "gauge", "The worker's handler threads serving a request.");
  for (const WorkerSnapshot& x : s.workers)
    w.sample(p + "worker_busy_threads", worker(x), num(x.busy_threads));
  w.family(p + "worker_generation", "gauge", "The worker's generation (reloads).");
  for (const WorkerSnapshot& x : s.workers)
    w.sample(p + "worker_generation", worker(x), num(x.generation));
  w.family(p + "worker_last_request_duration_seconds", "gauge",
           "Wall time of the worker's last request.");
  for (const WorkerSnapshot& x : s.workers)
    w.sample(p + "worker_last_request_duration_seconds", worker(x), secs(x.last_duration_ns));
  w.family(p + "worker_pss_bytes", "gauge", "The worker's PSS (its share of the pages it maps).");
  for (const WorkerSnapshot& x : s.workers)
    if (x.memory) w.sample(p + "worker_pss_bytes", worker(x), num(x.memory->pss_bytes));
  w.family(p + "worker_rss_bytes", "gauge", "The worker's resident memory.");
  for (const WorkerSnapshot& x : s.workers)
    if (x.memory) w.sample(p + "worker_rss_bytes", worker(x), num(x.memory->rss_bytes));
  return w.finish();
}

std::string html_page(const Snapshot& s) {
  std::string out =
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><meta http-equiv=\"refresh\" "
      "content=\"2\"><title>fcgi-host status</title><style>body{font-family:sans-serif}"
      "table{border-collapse:collapse;margin-bottom:1em}td,th{border:1px solid #ccc;padding:"
      "2px 8px;text-align:right}th{background:#eee}</style></head><body>\n"
      "<h1>fcgi-host status</h1>\n<table>\n";
  for (auto& [k, v] : page_fields(s, kTextForm))
    out += "<tr><th>" + html_escape(k) + "</th><td>" + html_escape(v) + "</td></tr>\n";
  out += "</table>\n<table><tr><th>handler</th><th>calls</th><th>5xx</th><th>crashed</th>"
         "<th>avg ms</th>"
         "<th>cpu s (est.)</th></tr>\n";
  for (const RouteSnapshot& r : s.routes)
    out += "<tr><td>" + html_escape(r.name) + "</td><td>" + num(r.calls) + "</td><td>" +
           num(r.errors) + "</td><td>" + num(r.crashed) + "</td><td>" +
           (r.calls ? secs(r.wall_ns / r.calls * 1000) : std::string("-")) + "</td><td>" +
           secs(r.cpu_estimate_ns()) + "</td></tr>\n";
  out += "</table>\n<table><tr><th>slot</th><th>pid</th><th>gen</th><th>state</th>"
         "<th>requests</th><th>current request</th><th>request id</th><th>for ms</th>"
         "<th>last ms</th></tr>\n";
  for (const WorkerSnapshot& w : s.workers)
    out += "<tr><td>" + num(w.slot) + "</td><td>" + num(static_cast<std::uint64_t>(w.pid)) +
           "</td><td>" + num(w.generation) + "</td><td>" + process_manager::to_string(w.state) +
           "</td><td>" + num(w.requests) + "</td><td>" + html_escape(w.method + " " + w.uri) +
           "</td><td>" + html_escape(w.request_id) + "</td><td>" +
           num(w.request_duration_ns / 1'000'000) + "</td><td>" +
           num(w.last_duration_ns / 1'000'000) + "</td></tr>\n";
  return out + "</table>\n</body></html>\n";
}

// The master: this process, unless this is a worker answering --status-path (its slot holds its
// pid), whose parent the master is.
pid_t master_pid(const Snapshot& snap) {
  const pid_t self = ::getpid();
  for (const WorkerSnapshot& w : snap.workers)
    if (w.pid == self) return ::getppid();
  return self;
}

} // namespace

std::string render_status(const Snapshot& snap, StatusQuery query, std::string& content_type) {
  switch (query.format) {
  case StatusFormat::Json:
    content_type = "application/json";
    return json_page(snap, query.full);
  case StatusFormat::OpenMetrics:
    content_type = "application/openmetrics-text; version=1.0.0; charset=utf-8";
    return metrics_page(snap, true, query.pool_label ? snap.pool_name : "");
  case StatusFormat::Prometheus:
    content_type = "text/plain; version=0.0.4; charset=utf-8";
    return metrics_page(snap, false, query.pool_label ? snap.pool_name : "");
  case StatusFormat::Html:
    content_type = "text/html; charset=utf-8";
    return html_page(snap);
  case StatusFormat::Text:
    break;
  }
  content_type = "text/plain";
  return text_page(snap, query.full);
}

Snapshot page_snapshot(const ObservabilitySettings& settings,
                       const process_manager::Scoreboard& scoreboard, int listen_fd) {
  Snapshot snap = take_snapshot(scoreboard, listen_fd, settings.pool_mode);
  add_process_memory(snap, master_pid(snap));
  snap.pool_name = settings.pool_name;
  snap.sandbox = settings.sandbox;
  return snap;
}

EndpointReply answer_endpoint(Endpoint endpoint, const ObservabilitySettings& settings,
                              const process_manager::Scoreboard& scoreboard, int listen_fd,
                              std::string_view query, bool allowed, std::string_view accept,
                              bool stopping) {
  EndpointReply reply;
  reply.headers.emplace_back("Cache-Control", "no-store");
  reply.headers.emplace_back(std::string(kHostHeader), kVersion);
  if (!allowed) {
    reply.status = 403;
    reply.body = "Forbidden\n";
    return reply;
  }
  if (endpoint == Endpoint::Ping) {
    reply.status = stopping ? 503 : 200;
    reply.body = stopping ? "stopping\n" : settings.ping_response + "\n";
    return reply;
  }
  Snapshot snap = page_snapshot(settings, scoreboard, listen_fd);
  reply.body = render_status(snap, parse_status_query(query, accept), reply.content_type);
  reply.headers.emplace_back("X-Idle-Workers", num(snap.idle));
  reply.headers.emplace_back("X-Listen-Queue",
                             snap.listen_queue.known ? num(snap.listen_queue.depth) : "-");
  return reply;
}

void fill_response(const EndpointReply& reply, app::Response& response) {
  response.status = reply.status;
  for (auto& [name, value] : reply.headers)
    response.set_header(name, value);
  response.set_content(reply.body, reply.content_type);
}

bool remote_addr_allowed(const ClientFilter& filter, std::string_view remote_addr) {
  if (filter.allows_everyone()) return true;
  // nginx sends `unix:` for a client of a `listen unix:` server; no address at all means the
  // same to us (a client on the host's own Unix socket). Only the `unix` token lets them in.
  if (remote_addr.empty() || remote_addr == "unix:") return filter.allows_unix_clients();
  std::string text(remote_addr);
  sockaddr_in v4{};
  sockaddr_in6 v6{};
  if (inet_pton(AF_INET, text.c_str(), &v4.sin_addr) == 1) {
    v4.sin_family = AF_INET;
    return filter.allows(reinterpret_cast<sockaddr*>(&v4));
  }
  if (inet_pton(AF_INET6, text.c_str(), &v6.sin6_addr) == 1) {
    v6.sin6_family = AF_INET6;
    return filter.allows(reinterpret_cast<sockaddr*>(&v6));
  }
  return false; // fail closed: what does not parse strictly (010.0.0.1, fe80::1%eth0) is no match
}

EndpointReply plain_reply(int status, std::string body) {
  EndpointReply r;
  r.status = status;
  r.body = std::move(body);
  r.headers.emplace_back(std::string(kHostHeader), kVersion);
  return r;
}

} // namespace fcgi_host
