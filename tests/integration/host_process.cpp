// HostProcess: the real fcgi-host binary, run in a temporary directory, its log checked at the
// end (the oracle: no alert, crit, emerg or sanitizer line the test did not expect).
#include "child_process.hpp"
#include "harness.hpp"
#include "support/proc.hpp"

#include <csignal>
#include <cstdio>
#include <doctest/doctest.h>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <unistd.h>

#ifndef FCGI_HOST_BINARY
#define FCGI_HOST_BINARY ""
#endif

namespace it {

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (auto pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
    s.replace(pos, from.size(), to);
  return s;
}

using Clock = std::chrono::steady_clock;
using detail::kill_group_and_reap;
using detail::reap;
using detail::spawn;
using fcgi_test::Error;

namespace {

// The value of `--name value` or `--name=value` in argv, or "".
std::string option_value(const std::vector<std::string>& argv, const std::string& name) {
  std::string value;
  for (std::size_t i = 1; i < argv.size(); ++i) {
    if (argv[i] == name && i + 1 < argv.size()) value = argv[i + 1];
    if (argv[i].starts_with(name + "=")) value = argv[i].substr(name.size() + 1);
  }
  return value;
}

} // namespace

std::string HostProcess::binary() {
  if (const char* env = std::getenv("FCGI_HOST_BINARY"); env && *env) return env;
  return FCGI_HOST_BINARY;
}

HostProcess::HostProcess(std::vector<std::string> args)
    : HostProcess(HostOptions{std::move(args), {}}) {}

HostProcess::HostProcess(HostOptions o) : expected_(o.expect_log), allowed_(o.allow_log) {
  for (const auto& [name, content] : o.files)
    dir_.write(name, replace_all(content, "{dir}", dir_.path()));
  std::vector<std::string> argv{binary()};
  if (argv[0].empty()) throw Error("no fcgi-host binary: the fcgi-host target was not built");
  for (const auto& a : o.args)
    argv.push_back(replace_all(a, "{dir}", dir_.path()));
  switch (o.listen) {
  case Listen::UnixSocket:
    address_ = "unix:" + dir_.file("host.sock");
    break;
  case Listen::Tcp:
    address_ = "127.0.0.1:" + std::to_string(free_tcp_port());
    break;
  case Listen::AsGiven:
    address_ = option_value(argv, "--listen");
    break;
  }
  // Before the test's words: every word after `--exec PROGRAM` is the program's.
  if (o.listen != Listen::AsGiven) argv.insert(argv.begin() + 1, {"--listen", address_});
  status_address_ = option_value(argv, "--status-listen");
  if (o.status_socket && status_address_.empty()) {
    status_address_ = "unix:" + dir_.file("status.sock");
    argv.insert(argv.begin() + 1, {"--status-listen", status_address_});
  }
  error_log_ = option_value(argv, "--error-log");
  argv.insert(argv.begin(), o.wrapper.begin(), o.wrapper.end());
  pid_ = spawn(argv, log_path(), dir_.path());
  if (o.wait_ready && !wait_ready(Millis{10000})) {
    std::string why = exit_status_ ? "exited with status " + std::to_string(*exit_status_)
                                   : "did not accept within 10 s";
    std::string log_text = log();
    ::kill(-pid_, SIGKILL); // workers it may have left behind
    if (!exit_status_) kill_group_and_reap(pid_);
    throw Error("fcgi-host on " + address_ + " " + why + "; its log:\n" + log_text);
  }
}

namespace {

// A master killed here leaves its plugin directory ("fcgi-host-plugins.<pid>.*"). Under $TMPDIR
// that is the case's scratch directory, removed after it; with --private-tmp it is in /dev/shm,
// removed here (the next master would sweep it too: plugin_copy.hpp).
void remove_plugin_directories(const std::vector<pid_t>& masters) {
  std::error_code ec;
  for (std::filesystem::directory_iterator it("/dev/shm", ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    for (pid_t pid : masters)
      if (name.starts_with("fcgi-host-plugins." + std::to_string(pid) + ".")) {
        std::error_code ignored;
        std::filesystem::remove_all(it->path(), ignored);
      }
  }
}

} // namespace

HostProcess::~HostProcess() {
  std::vector<pid_t> masters = pids_in_group(pid_); // a pool's master among them
  masters.push_back(pid_);
  if (!exit_status_) kill_group_and_reap(pid_);
  // Workers may have left the group or outlived the master (the very thing some tests check).
  for (pid_t w : known_workers_)
    if (process_alive(w) && ::getpgid(w) == pid_) ::kill(w, SIGKILL);
  for (pid_t p : pids_in_group(pid_))
    ::kill(p, SIGKILL);
  remove_plugin_directories(masters);
  if (!log_checked_) check_log();
}

std::string HostProcess::log() const {
  std::string text = read_file(log_path());
  if (!error_log_.empty()) text += read_file(error_log_);
  return text;
}

bool HostProcess::wait_log(const std::string& pattern, Millis timeout, std::size_t count) {
  return wait_for(
             [&] { return test_wait::matching_lines(log(), pattern).size() >= count || exited(); },
             timeout) &&
         test_wait::matching_lines(log(), pattern).size() >= count;
}

std::vector<std::string> alarming_lines(const std::string& log) {
  return test_wait::matching_lines(log,
                                   R"(\[(alert|crit|emerg)\]|AddressSanitizer|LeakSanitizer|)"
                                   R"(UndefinedBehaviorSanitizer|ThreadSanitizer|runtime error:)");
}

void HostProcess::check_log() {
  log_checked_ = true;
  std::string text = log();
  std::vector<std::string> unexpected;
  for (const std::string& line : alarming_lines(text)) {
    auto matches = [&](const std::string& p) { return std::regex_search(line, std::regex(p)); };
    if (std::none_of(expected_.begin(), expected_.end(), matches) &&
        std::none_of(allowed_.begin(), allowed_.end(), matches))
      unexpected.push_back(line);
  }
  std::string report;
  for (const std::string& line : unexpected)
    report += line + "\n";
  INFO("unexpected lines in the host's log (declare them with expect_log or allow_log):\n"
       << report << "whole log:\n"
       << text);
  CHECK(unexpected.empty());
  for (const std::string& pattern : expected_) {
    INFO("expect_log(\"" << pattern << "\") matched no line; the log:\n" << text);
    CHECK(!test_wait::matching_lines(text, pattern).empty());
  }
}

bool HostProcess::wait_ready(Millis timeout) {
  if (address_.empty()) return !wait_exit(Millis{0});
  return wait_for(
             [&] {
               if (wait_exit(Millis{0}))
                 return true; // exited: stop waiting (and report false below)
               try {
                 ::close(fcgi_test::connect_socket(address_, Millis{200}));
                 return true;
               } catch (const Error&) {
                 return false;
               }
             },
             timeout) &&
         !exit_status_;
}

void HostProcess::signal(int sig) {
  if (!exit_status_) ::kill(pid_, sig);
}

std::optional<int> HostProcess::wait_exit(Millis timeout) {
  if (!exit_status_) exit_status_ = reap(pid_, timeout);
  return exit_status_;
}

fcgi_test::Client HostProcess::connect(Millis timeout) const {
  return fcgi_test::Client::connect(address_, timeout);
}

namespace {
// A mold of the host (process_manager/mold.hpp: kMoldProcessName), by its /proc/PID/comm.
bool is_mold_process(pid_t pid) {
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(comm, name);
  return name == "fcgi-host mold";
}
} // namespace

std::vector<pid_t> HostProcess::worker_pids() {
  std::vector<pid_t> pids;
  for (pid_t p : child_pids(pid_)) {
    if (std::find(known_workers_.begin(), known_workers_.end(), p) == known_workers_.end())
      known_workers_.push_back(p);
    if (!is_mold_process(p)) pids.push_back(p);
  }
  return pids;
}

std::vector<pid_t> HostProcess::mold_pids() {
  std::vector<pid_t> molds;
  for (pid_t p : child_pids(pid_)) {
    if (std::find(known_workers_.begin(), known_workers_.end(), p) == known_workers_.end())
      known_workers_.push_back(p);
    if (is_mold_process(p)) molds.push_back(p);
  }
  return molds;
}

namespace {

// The host's listening socket is in place: a Unix socket's path exists (it is renamed there once
// bound), a TCP port is in /proc/net/tcp{,6} in state LISTEN. Looked at, never connected to.
bool listening_at(const std::string& address) {
  if (address.starts_with("unix:")) {
    std::error_code ec;
    return std::filesystem::is_socket(address.substr(5), ec);
  }
  const std::size_t colon = address.rfind(':');
  if (colon == std::string::npos) return true; // not ours to judge: do not wait
  char port[8];
  std::snprintf(port, sizeof port, ":%04X",
                static_cast<unsigned>(std::stoul(address.substr(colon + 1))));
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    while (std::getline(in, line)) {
      std::istringstream fields(line);
      std::string slot, local, remote, state;
      if (fields >> slot >> local >> remote >> state && state == "0A" && local.ends_with(port))
        return true;
    }
  }
  return false;
}

} // namespace

// The start's plugin check runs in a child of the master before the socket is opened, and the
// workers are forked after: once the socket is in place, the master's children are workers.
// (At a reload the check child comes again, before the new generation: see the HUP tests.)
std::vector<pid_t> HostProcess::wait_workers(std::size_t n, Millis timeout) {
  // Bounded by the same timeout; a master that exits, or an address not judged here, goes on to
  // the count as before.
  wait_for(
      [&] {
        auto s = test_support::proc_stat(pid_);
        return listening_at(address_) || exited() || !s || !s->running();
      },
      timeout);
  std::vector<pid_t> pids;
  wait_for([&] { return (pids = worker_pids()).size() == n; }, timeout);
  return pids.size() == n ? pids : std::vector<pid_t>{};
}

std::vector<pid_t> HostProcess::wait_worker_replaced(pid_t old, std::size_t n, Millis timeout) {
  std::vector<pid_t> pids;
  wait_for(
      [&] {
        pids = worker_pids();
        return pids.size() == n && std::find(pids.begin(), pids.end(), old) == pids.end();
      },
      timeout);
  return pids.size() == n && std::find(pids.begin(), pids.end(), old) == pids.end()
             ? pids
             : std::vector<pid_t>{};
}

long json_number(const std::string& json, const std::string& field) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex("\"" + field + "\":(-?[0-9]+)"))) return -1;
  return std::stol(m[1]);
}

std::string HostProcess::status_json(bool full) const {
  if (status_address_.empty()) throw Error("status_json: the host has no --status-listen");
  try {
    auto c = fcgi_test::Client::connect(status_address_, Millis{1000});
    c.set_keep_conn(false);
    return c.request("GET", full ? "/status?json&full" : "/status?json").body;
  } catch (const Error&) {
    return "";
  }
}

std::string HostProcess::wait_status(const std::function<bool(const std::string&)>& holds,
                                     Millis timeout, bool full) const {
  std::string json;
  bool seen = wait_for(
      [&] {
        json = status_json(full);
        return !json.empty() && holds(json);
      },
      timeout);
  return seen ? json : std::string();
}

std::string HostProcess::wait_status(const std::string& field, long value, Millis timeout,
                                     bool full) const {
  return wait_status([&](const std::string& json) { return json_number(json, field) == value; },
                     timeout, full);
}

bool HostProcess::wait_active(long n, Millis timeout) const {
  return !wait_status("active processes", n, timeout).empty();
}

bool HostProcess::wait_accepted(Millis timeout) const {
  return !wait_status("listen queue", 0, timeout).empty();
}

bool HostProcess::wait_master_turn(Millis timeout) const {
  // Three answers, each asked for after the one before came: the status server drains what is
  // queued when it is called, so the later questions are answered in later turns.
  auto deadline = Clock::now() + timeout;
  for (int i = 0; i < 3; ++i)
    if (!wait_for([&] { return !status_json().empty(); },
                  std::chrono::duration_cast<Millis>(deadline - Clock::now())))
      return false;
  return true;
}

bool HostProcess::wait_serving(const std::string& uri, Millis timeout) const {
  // A worker's entry keeps its last URI when idle: it must say the request is in a handler —
  // the worker's state with one thread, a busy thread with several (the entry shows the
  // request running longest).
  const std::string entry = "\"request uri\":\"" + uri + "\"";
  const std::regex in_handler("\"state\":\"handling\"|\"busy threads\":[1-9]");
  return wait_for(
      [&] {
        std::string json = status_json(true);
        const std::string start = "{\"pid\":";
        for (auto at = json.find(start); at != std::string::npos; at = json.find(start, at + 1)) {
          const std::string worker = json.substr(at, json.find('}', at) - at);
          if (worker.find(entry) != std::string::npos && std::regex_search(worker, in_handler))
            return true;
        }
        return false;
      },
      timeout);
}

RunResult run_host(HostOptions options, Millis timeout) {
  options.wait_ready = false;
  HostProcess host(std::move(options));
  RunResult r;
  r.status = host.wait_exit(timeout).value_or(-1);
  r.output = host.log();
  return r;
}

} // namespace it
