#include "fcgi_host/observe/status_fields.hpp"

#include "process_manager/clock.hpp"
#include "process_manager/rollout.hpp"

#include <algorithm>
#include <array>
#include <cstdio>
#include <ctime>

namespace fcgi_host {
namespace {

using K = FieldValue::Kind;

FieldValue number(std::uint64_t v) {
  return {K::Number, std::to_string(v)};
}
FieldValue text(std::string v) {
  return {K::Text, std::move(v)};
}
// A listen-queue figure, unknown where the kernel does not say (listen_queue.hpp).
FieldValue queue_figure(const Snapshot& s, std::uint32_t v) {
  return s.listen_queue.known ? number(v) : FieldValue{K::Unknown, ""};
}

std::string start_time_text(const Snapshot& s) {
  time_t t = static_cast<time_t>(s.start_time_s);
  tm local;
  localtime_r(&t, &local);
  char buf[64];
  strftime(buf, sizeof buf, "%d/%b/%Y:%H:%M:%S %z", &local); // php-fpm's format
  return buf;
}

// The rollout's rows: absent until the pool reloaded.
FieldValue rollout_figure(const Snapshot& s, std::uint64_t v) {
  return s.rollout_phase != 0 ? number(v) : FieldValue{};
}
FieldValue rollout_p99(const Snapshot& s, std::uint64_t ns) {
  return s.rollout_phase != 0 ? FieldValue{K::Number, process_manager::seconds_number(ns, 6)}
                              : FieldValue{};
}
std::string rollout_phase_text(const Snapshot& s) {
  return process_manager::to_string(static_cast<process_manager::RolloutPhase>(s.rollout_phase));
}

std::uint64_t restarts(const Snapshot& s) {
  std::uint64_t n = 0;
  for (auto& [code, count] : s.exits_by_code)
    n += count;
  for (auto& [sig, count] : s.exits_by_signal)
    n += count;
  return n;
}

constexpr unsigned kPages = kTextForm | kJsonForm;
constexpr unsigned kNotJson = kTextForm | kMetricForm; // JSON has these in an object of its own
constexpr auto G = MetricKind::Gauge;
constexpr auto C = MetricKind::Counter;

// A data table: one row per field, in the pages' order (php-fpm's first, then ours).
const std::array kFields = std::to_array<StatusField>({
    {"", "up", G, "", "Whether the host answers.", kMetricForm,
     [](const Snapshot&) { return number(1); }},
    {"pool", "", G, "", "", kPages, [](const Snapshot& s) { return text(s.pool_name); }},
    {"process manager", "", G, "", "", kPages, [](const Snapshot& s) { return text(s.pool_mode); }},
    {"sandbox", "", G, "", "", kPages, [](const Snapshot& s) { return text(s.sandbox); }},
    {"start time", "start_time_seconds", G, "", "When the master started, seconds since the epoch.",
     kEveryForm, [](const Snapshot& s) { return number(s.start_time_s); }, start_time_text},
    {"start since", "start_since_seconds", G, "", "Seconds since the master started.", kEveryForm,
     [](const Snapshot& s) { return number(s.uptime_s); }},
    {"accepted conn", "accepted_connections", C, "", "Connections accepted by the workers.",
     kEveryForm, [](const Snapshot& s) { return number(s.accepted); }},
    {"handed off conn", "handed_off_connections", C, "",
     "Kept connections a worker passed to another (slow handler, stop).", kEveryForm,
     [](const Snapshot& s) { return number(s.handed_off); }},
    {"requests", "requests", C, "", "Requests served.", kEveryForm,
     [](const Snapshot& s) { return number(s.requests); }},
    {"listen queue", "listen_queue", G, "", "Connections waiting in the listen queue.", kEveryForm,
     [](const Snapshot& s) { return queue_figure(s, s.listen_queue.depth); }},
    {"max listen queue", "max_listen_queue", G, "",
     "Most connections seen waiting in the listen queue.", kEveryForm,
     [](const Snapshot& s) { return number(s.max_listen_queue); }},
    {"listen queue len", "listen_queue_length", G, "", "Size of the listen queue (backlog).",
     kEveryForm, [](const Snapshot& s) { return queue_figure(s, s.listen_queue.backlog); }},
    {"idle processes", "idle_processes", G, "", "Workers waiting for a request.", kEveryForm,
     [](const Snapshot& s) { return number(s.idle); }},
    {"active processes", "active_processes", G, "", "Workers serving a request.", kEveryForm,
     [](const Snapshot& s) { return number(s.active); }},
    {"total processes", "total_processes", G, "", "Workers.", kEveryForm,
     [](const Snapshot& s) { return number(s.total); }},
    {"max active processes", "max_active_processes", G, "", "Most workers seen serving at once.",
     kEveryForm, [](const Snapshot& s) { return number(s.max_active); }},
    {"max children reached", "max_children_reached", C, "", "Times every worker was seen busy.",
     kEveryForm, [](const Snapshot& s) { return number(s.all_busy); }},
    {"slow requests", "slow_requests", C, "", "Requests slower than --slow-request-threshold.",
     kEveryForm, [](const Snapshot& s) { return number(s.slow_requests); }},
    {"aborted requests", "aborted_requests", C, "",
     "Requests the web server aborted or closed before the answer (logged as 499).", kEveryForm,
     [](const Snapshot& s) { return number(s.aborted_requests); }},
    {"request timeout kills", "request_timeout_kills", C, "",
     "Workers killed by --request-timeout.", kEveryForm,
     [](const Snapshot& s) { return number(s.kills_by_timeout); }},
    {"oom kills", "oom_kills", C, "",
     "Workers killed by the OOM killer in the pool's cgroup (memory-max).", kEveryForm,
     [](const Snapshot& s) { return number(s.oom_kills); }},
    {"busy threads", "busy_threads", G, "",
     "Handler threads serving a request (one per worker without --threads).", kEveryForm,
     [](const Snapshot& s) { return number(s.threads_busy); }},
    {"idle threads", "idle_threads", G, "", "Handler threads waiting for a request.", kEveryForm,
     [](const Snapshot& s) { return number(s.threads_total - s.threads_busy); }},
    {"max busy threads", "max_busy_threads", G, "",
     "Most handler threads seen serving at once (max active processes counts processes).",
     kEveryForm, [](const Snapshot& s) {
       return number(std::max(s.max_busy_threads, s.threads_busy));
     }},
    // For an autoscaler: one family, no arithmetic across two.
    {"utilization", "utilization", G, "",
     "Busy handler threads of all the workers' handler threads (0 to 1).", kEveryForm,
     [](const Snapshot& s) { return FieldValue{K::Number, utilization_text(s)}; }},
    {"target processes", "pm_target_processes", G, "",
     "Workers the process manager keeps now (--workers, or as scaled).", kEveryForm,
     [](const Snapshot& s) { return number(s.target_workers); }},
    {"max processes", "pm_max_processes", G, "",
     "Most workers the process manager may run (--workers, or --max-workers).", kEveryForm,
     [](const Snapshot& s) { return number(s.max_workers); }},
    {"threads per process", "pm_threads_per_process", G, "", "Handler threads per worker.",
     kEveryForm, [](const Snapshot& s) { return number(s.threads_per_worker); }},
    {"requests lost in crashes", "requests_lost", C, "reason=\"crash\"",
     "Requests in flight lost with their worker, by reason (crash: the other threads' requests "
     "of a worker that crashed in one).",
     kEveryForm, [](const Snapshot& s) { return number(s.requests_lost_crash); }},
    {"worker restarts", "worker_restarts", C, "", "Worker exits the master did not ask for.",
     kEveryForm, [](const Snapshot& s) { return number(restarts(s)); }},
    // Queue time: only requests the web server stamped (X-Request-Start) are measured. JSON and
    // the metrics have all of it (a histogram), the text page these two.
    {"queue time measured", "", G, "", "", kTextForm,
     [](const Snapshot& s) { return number(s.queued()); }},
    {"queue time avg ms", "", G, "", "", kTextForm,
     [](const Snapshot& s) {
       return s.queued() ? FieldValue{K::Number, process_manager::seconds_number(
                                                     s.queue_sum_ns / s.queued() * 1000, 6)}
                         : FieldValue{K::Unknown, ""};
     }},
    {"shed waited too long", "shed_requests", C, "reason=\"queue_time\"",
     "Requests answered 503 without running the handler (--max-queue-time), by reason.",
     kNotJson, [](const Snapshot& s) { return number(s.shed_late); }},
    {"shed client gone", "shed_requests", C, "reason=\"client_gone\"", "", kNotJson,
     [](const Snapshot& s) { return number(s.shed_gone); }},
    {"idle work runs", "idle_work_runs", C, "",
     "Runs of the handler's on_idle() in idle workers and threads (--idle-work-after).", kEveryForm,
     [](const Snapshot& s) { return number(s.idle_work_runs); }},
    {"idle work seconds", "idle_work_seconds", C, "",
     "Time the workers and threads spent in on_idle(), taking no request.", kEveryForm,
     [](const Snapshot& s) {
       return FieldValue{K::Number, process_manager::seconds_number(s.idle_work_ns, 6)};
     }},
    {"rollout state", "rollout_state", G, "",
     "The last reload's rollout: 0 none, 1 starting, 2 watching (--rollout canary), 3 "
     "promoting, 4 promoted, 5 undone.",
     kEveryForm, [](const Snapshot& s) { return number(s.rollout_phase); }, rollout_phase_text},
    {"rollout generation", "rollout_generation", G, "", "The generation of the last reload's rollout.",
     kEveryForm, [](const Snapshot& s) { return rollout_figure(s, s.rollout_generation); }},
    {"rollout canary requests", "rollout_requests", G, "side=\"canary\"",
     "Requests in the canary rollout's window, by side (canary: the new generation; old: the one "
     "it would replace).",
     kEveryForm, [](const Snapshot& s) { return rollout_figure(s, s.rollout_canary.requests); }},
    {"rollout old requests", "rollout_requests", G, "side=\"old\"", "", kEveryForm,
     [](const Snapshot& s) { return rollout_figure(s, s.rollout_old.requests); }},
    {"rollout canary 5xx", "rollout_errors", G, "side=\"canary\"",
     "5xx answers in the canary rollout's window, by side.", kEveryForm,
     [](const Snapshot& s) { return rollout_figure(s, s.rollout_canary.errors); }},
    {"rollout old 5xx", "rollout_errors", G, "side=\"old\"", "", kEveryForm,
     [](const Snapshot& s) { return rollout_figure(s, s.rollout_old.errors); }},
    {"rollout canary p99 seconds", "rollout_p99_seconds", G, "side=\"canary\"",
     "The p99 duration in the canary rollout's window, by side.", kEveryForm,
     [](const Snapshot& s) { return rollout_p99(s, s.rollout_canary.p99_ns); }},
    {"rollout old p99 seconds", "rollout_p99_seconds", G, "side=\"old\"", "", kEveryForm,
     [](const Snapshot& s) { return rollout_p99(s, s.rollout_old.p99_ns); }},
    {"pss bytes", "pss_bytes", G, "",
     "PSS of the host's processes, the master included (those the page could read).", kEveryForm,
     [](const Snapshot& s) { return s.pss_processes ? number(s.pss_total_bytes) : FieldValue{}; }},
    {"pss processes", "pss_processes", G, "", "Processes summed in fcgihost_pss_bytes.",
     kEveryForm,
     [](const Snapshot& s) { return s.pss_processes ? number(s.pss_processes) : FieldValue{}; }},
    // --mold on: the current generation's mold ("-" and null without one).
    {"mold pid", "mold_pid", G, "", "The current generation's mold (--mold on).", kEveryForm,
     [](const Snapshot& s) { return s.mold.pid > 0 ? number(static_cast<std::uint64_t>(s.mold.pid)) : FieldValue{}; }},
    {"mold generation", "mold_generation", G, "", "The generation the mold forks workers for.",
     kEveryForm,
     [](const Snapshot& s) { return s.mold.pid > 0 ? number(s.mold.generation) : FieldValue{}; }},
    {"mold uptime s", "mold_uptime_seconds", G, "", "Seconds since the mold was started.",
     kEveryForm,
     [](const Snapshot& s) { return s.mold.pid > 0 ? number(s.mold.uptime_s) : FieldValue{}; }},
    {"mold pss bytes", "mold_pss_bytes", G, "",
     "PSS of the mold (the workers share most of its pages; counted in fcgihost_pss_bytes).",
     kEveryForm, [](const Snapshot& s) {
       return s.mold.memory ? number(s.mold.memory->pss_bytes) : FieldValue{};
     }},
});

} // namespace

std::span<const StatusField> status_fields() {
  return kFields;
}

std::string utilization_text(const Snapshot& s) {
  if (s.threads_total == 0) return "0";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g",
                static_cast<double>(s.threads_busy) / static_cast<double>(s.threads_total));
  return buf;
}

} // namespace fcgi_host
