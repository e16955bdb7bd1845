#include "harness.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <netinet/in.h>
#include <regex>
#include <sstream>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef FCGI_HOST_BINARY
#define FCGI_HOST_BINARY ""
#endif

namespace it {

using Clock = std::chrono::steady_clock;
using fcgi_test::Error;

namespace {

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
  for (auto pos = s.find(from); pos != std::string::npos; pos = s.find(from, pos + to.size()))
    s.replace(pos, from.size(), to);
  return s;
}

struct ProcStat {
  char state = '?';
  pid_t ppid = 0;
  pid_t pgrp = 0;
};

std::optional<ProcStat> proc_stat(pid_t pid) {
  std::string stat = read_file("/proc/" + std::to_string(pid) + "/stat");
  // The command name is in parentheses and may contain anything: parse after the last ')'.
  auto close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream in(stat.substr(close + 1));
  ProcStat s;
  in >> s.state >> s.ppid >> s.pgrp;
  if (!in) return std::nullopt;
  return s;
}

std::vector<pid_t> all_pids() {
  std::vector<pid_t> out;
  DIR* d = ::opendir("/proc");
  if (!d) return out;
  while (dirent* e = ::readdir(d)) {
    char* end = nullptr;
    long n = std::strtol(e->d_name, &end, 10);
    if (n > 0 && end && *end == '\0') out.push_back(static_cast<pid_t>(n));
  }
  ::closedir(d);
  return out;
}

// fork + exec with its own process group, stdin from /dev/null, stdout and stderr to `log`.
pid_t spawn(const std::vector<std::string>& argv, const std::string& log, const std::string& cwd) {
  std::vector<char*> cargv;
  for (const auto& a : argv)
    cargv.push_back(const_cast<char*>(a.c_str()));
  cargv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) throw Error(std::string("fork: ") + std::strerror(errno));
  if (pid == 0) {
    ::setpgid(0, 0); // one group per spawned server: the destructor can kill it whole
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    int in = ::open("/dev/null", O_RDONLY);
    int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (in < 0 || out < 0 || ::chdir(cwd.c_str()) != 0) ::_exit(126);
    ::dup2(in, 0); // never a socket: without --listen the host would take fd 0 as its socket
    ::dup2(out, 1);
    ::dup2(out, 2);
    ::execv(cargv[0], cargv.data());
    std::string msg = std::string("exec ") + cargv[0] + ": " + std::strerror(errno) + "\n";
    (void)!::write(2, msg.data(), msg.size());
    ::_exit(127);
  }
  ::setpgid(pid, pid); // also here, so the group exists whichever side runs first
  return pid;
}

// Waits (bounded) for our child `pid` to exit; returns its status as code or 128 + signal.
std::optional<int> reap(pid_t pid, Millis timeout) {
  return test_wait::wait_child_exit(pid, timeout);
}

// The value of `--name value` or `--name=value` in argv, or "".
std::string option_value(const std::vector<std::string>& argv, const std::string& name) {
  std::string value;
  for (std::size_t i = 1; i < argv.size(); ++i) {
    if (argv[i] == name && i + 1 < argv.size()) value = argv[i + 1];
    if (argv[i].starts_with(name + "=")) value = argv[i].substr(name.size() + 1);
  }
  return value;
}

void kill_group_and_reap(pid_t pid) {
  ::kill(-pid, SIGKILL);
  ::kill(pid, SIGKILL);
  reap(pid, Millis{5000});
}

} // namespace

// ---- TempDir -----------------------------------------------------------------------------------

TempDir::TempDir() {
  char tmpl[] = "/tmp/fcgi-it-XXXXXX";
  if (!::mkdtemp(tmpl)) throw Error(std::string("mkdtemp: ") + std::strerror(errno));
  path_ = tmpl;
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::string TempDir::write(const std::string& name, const std::string& content) const {
  std::string p = file(name);
  std::filesystem::create_directories(std::filesystem::path(p).parent_path());
  std::ofstream out(p, std::ios::binary);
  out << content;
  if (!out) throw Error("cannot write " + p);
  return p;
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

int free_tcp_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0; // the kernel picks a free one
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (fd >= 0) ::close(fd);
    throw Error(std::string("finding a free port: ") + std::strerror(errno));
  }
  ::close(fd);
  return ntohs(a.sin_port);
}

// ---- /proc -------------------------------------------------------------------------------------

bool process_alive(pid_t pid) {
  auto s = proc_stat(pid);
  return s && s->state != 'Z' && s->state != 'X';
}

std::vector<pid_t> child_pids(pid_t parent) {
  std::vector<pid_t> out;
  for (pid_t p : all_pids())
    if (auto s = proc_stat(p); s && s->ppid == parent && s->state != 'Z' && s->state != 'X')
      out.push_back(p);
  return out;
}

std::vector<pid_t> pids_in_group(pid_t pgid) {
  std::vector<pid_t> out;
  for (pid_t p : all_pids())
    if (auto s = proc_stat(p); s && s->pgrp == pgid && s->state != 'Z' && s->state != 'X')
      out.push_back(p);
  return out;
}

bool holds_open(pid_t pid, const std::string& path) {
  std::error_code ec;
  std::filesystem::directory_iterator fds("/proc/" + std::to_string(pid) + "/fd", ec);
  for (; !ec && fds != std::filesystem::directory_iterator(); fds.increment(ec)) {
    std::error_code link_ec;
    if (std::filesystem::read_symlink(fds->path(), link_ec) == path) return true;
  }
  return false;
}

std::vector<std::string> lines_with(const std::string& log, const std::string& needle) {
  std::vector<std::string> out;
  std::istringstream in(log);
  for (std::string line; std::getline(in, line);)
    if (line.find(needle) != std::string::npos) out.push_back(line);
  return out;
}

// ---- HostProcess -------------------------------------------------------------------------------

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

HostProcess::~HostProcess() {
  if (!exit_status_) kill_group_and_reap(pid_);
  // Workers may have left the group or outlived the master (the very thing some tests check).
  for (pid_t w : known_workers_)
    if (process_alive(w) && ::getpgid(w) == pid_) ::kill(w, SIGKILL);
  for (pid_t p : pids_in_group(pid_))
    ::kill(p, SIGKILL);
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

std::vector<pid_t> HostProcess::worker_pids() {
  auto pids = child_pids(pid_);
  for (pid_t p : pids)
    if (std::find(known_workers_.begin(), known_workers_.end(), p) == known_workers_.end())
      known_workers_.push_back(p);
  return pids;
}

std::vector<pid_t> HostProcess::wait_workers(std::size_t n, Millis timeout) {
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

namespace {

// A number from the JSON status page, e.g. "active processes"; nullopt when absent.
std::optional<long> json_number(const std::string& json, const std::string& key) {
  std::smatch m;
  if (!std::regex_search(json, m, std::regex("\"" + key + "\":(-?[0-9]+)"))) return std::nullopt;
  return std::stol(m[1]);
}

} // namespace

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

bool HostProcess::wait_active(long n, Millis timeout) const {
  return wait_for([&] { return json_number(status_json(), "active processes") == n; }, timeout);
}

bool HostProcess::wait_accepted(Millis timeout) const {
  return wait_for([&] { return json_number(status_json(), "listen queue") == 0L; }, timeout);
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
  // A worker's entry keeps its last URI when idle: the state must say it is in the handler.
  const std::string handling = "\"state\":\"handling\"";
  const std::string entry = "\"request uri\":\"" + uri + "\"";
  return wait_for(
      [&] {
        std::string json = status_json(true);
        for (auto at = json.find(handling); at != std::string::npos;
             at = json.find(handling, at + 1)) {
          auto end = json.find('}', at);
          if (json.substr(at, end - at).find(entry) != std::string::npos) return true;
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

// ---- ServerProcess -----------------------------------------------------------------------------

ServerProcess::ServerProcess(std::string name, const std::vector<std::string>& argv,
                             const std::string& out_log, const std::string& cwd, int port,
                             int stop_signal, const std::function<std::string()>& describe)
    : stop_signal_(stop_signal) {
  pid_ = spawn(argv, out_log, cwd);
  std::string target = "127.0.0.1:" + std::to_string(port);
  bool ready = wait_for(
      [&] {
        if (!process_alive(pid_)) return true;
        try {
          ::close(fcgi_test::connect_socket(target, Millis{200}));
          return true;
        } catch (const Error&) {
          return false;
        }
      },
      Millis{10000});
  if (!ready || !process_alive(pid_)) {
    std::string why = describe();
    kill_group_and_reap(pid_);
    pid_ = -1;
    throw Error(name + " did not start on " + target + ":\n" + why);
  }
}

ServerProcess::~ServerProcess() {
  if (pid_ <= 0) return;
  ::kill(pid_, stop_signal_);
  if (!reap(pid_, Millis{5000})) kill_group_and_reap(pid_);
  for (pid_t p : pids_in_group(pid_))
    ::kill(p, SIGKILL);
}

// ---- NginxProcess ------------------------------------------------------------------------------

NginxProcess::NginxProcess(NginxOptions o) {
  std::string addr = o.fastcgi_address;
  if (addr.starts_with("/")) addr = "unix:" + addr;
  port_ = free_tcp_port();
  const std::string& d = dir_.path();
  std::string upstream, pass = addr, keep;
  if (o.upstream_keepalive > 0) {
    upstream = "  upstream host {\n    server " + addr + ";\n    keepalive " +
               std::to_string(o.upstream_keepalive) + ";\n  }\n";
    pass = "host";
    keep = "      fastcgi_keep_conn on;\n";
  }
  std::string more;
  for (const auto& [prefix, address] : o.locations)
    more += "    location " + prefix + " {\n      include /etc/nginx/fastcgi_params;\n" +
            "      fastcgi_pass " + (address.starts_with("/") ? "unix:" + address : address) +
            ";\n    }\n";
  // `user root`: nginx started as root would run its worker as www-data, which cannot reach a
  // socket inside our private 0700 temp dir (a 502 "Permission denied" that is no host bug).
  dir_.write("nginx.conf", "daemon off;\nmaster_process on;\nworker_processes 1;\nuser root;\n"
                           "error_log " +
                               d + "/error.log notice;\npid " + d +
                               "/nginx.pid;\n"
                               "events { worker_connections 1024; }\n"
                               "http {\n"
                               "  access_log off;\n"
                               "  client_body_temp_path " +
                               d +
                               "/client_body;\n"
                               "  proxy_temp_path " +
                               d +
                               "/proxy;\n"
                               "  fastcgi_temp_path " +
                               d +
                               "/fastcgi;\n"
                               "  uwsgi_temp_path " +
                               d +
                               "/uwsgi;\n"
                               "  scgi_temp_path " +
                               d +
                               "/scgi;\n"
                               "  client_max_body_size " +
                               o.client_max_body_size + ";\n" + upstream +
                               "  server {\n"
                               "    listen 127.0.0.1:" +
                               std::to_string(port_) +
                               ";\n"
                               "    server_name localhost;\n" +
                               o.server_extra +
                               "    location / {\n"
                               "      include /etc/nginx/fastcgi_params;\n"
                               "      fastcgi_param SCRIPT_NAME $fastcgi_script_name;\n"
                               "      fastcgi_param HTTP_X_REQUEST_START \"t=${msec}\";\n"
                               "      fastcgi_param HTTP_X_REQUEST_ID $request_id;\n"
                               "      add_header X-Request-Id $request_id always;\n"
                               "      fastcgi_pass " +
                               pass + ";\n" + keep + "    }\n" + more +
                               "  }\n"
                               "}\n");
  // -e: the error log before the config is read would otherwise go to /var/log/nginx.
  // QUIT: graceful, lets the worker finish and nginx remove its pid file.
  server_ = std::make_unique<ServerProcess>(
      "nginx",
      std::vector<std::string>{"/usr/sbin/nginx", "-p", d + "/", "-c", d + "/nginx.conf", "-e",
                               d + "/error.log"},
      dir_.file("nginx.out"), d, port_, SIGQUIT,
      [this] { return read_file(dir_.file("nginx.out")) + error_log(); });
}

NginxProcess::~NginxProcess() = default;

std::string NginxProcess::error_log() const {
  return read_file(dir_.file("error.log"));
}

// ---- HTTP client -------------------------------------------------------------------------------

std::optional<std::string> HttpResponse::header(const std::string& name) const {
  auto lower = [](std::string s) {
    std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
    return s;
  };
  for (const auto& [n, v] : headers)
    if (lower(n) == lower(name)) return v;
  return std::nullopt;
}

namespace {

std::string decode_chunked(std::string_view in) {
  std::string out;
  for (;;) {
    auto eol = in.find("\r\n");
    if (eol == std::string_view::npos) throw Error("HTTP: truncated chunked body");
    std::size_t size = std::stoul(std::string(in.substr(0, eol)), nullptr, 16);
    in.remove_prefix(eol + 2);
    if (size == 0) return out;
    if (in.size() < size + 2) throw Error("HTTP: truncated chunk");
    out += in.substr(0, size);
    in.remove_prefix(size + 2);
  }
}

// Sends `request` on a new connection and reads the whole answer (the server closes).
HttpResponse exchange(int port, const std::string& method, const std::string& target,
                      const std::string& request, Millis timeout) {
  fcgi_test::Client conn(fcgi_test::connect_socket("127.0.0.1:" + std::to_string(port), timeout));
  conn.set_timeout(timeout);
  conn.send_raw(request);
  auto all = conn.read_until_closed(timeout);
  if (all.status == fcgi_test::IoStatus::TimedOut)
    throw fcgi_test::TimeoutError("HTTP " + method + " " + target + ": no complete answer in " +
                                  std::to_string(timeout.count()) + " ms");
  std::string_view raw = all.data;
  auto head_end = raw.find("\r\n\r\n");
  if (!raw.starts_with("HTTP/1.") || head_end == std::string_view::npos)
    throw Error("HTTP " + method + " " + target +
                ": malformed response: " + std::string(raw.substr(0, 200)));
  HttpResponse r;
  r.status = std::atoi(std::string(raw.substr(9, 3)).c_str());
  std::istringstream head(std::string(raw.substr(0, head_end)));
  std::string line;
  std::getline(head, line); // status line
  while (std::getline(head, line)) {
    if (!line.empty() && line.back() == '\r') line.pop_back();
    auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    auto value = line.substr(colon + 1);
    value.erase(0, value.find_first_not_of(" \t"));
    r.headers.emplace_back(line.substr(0, colon), value);
  }
  std::string_view rest = raw.substr(head_end + 4);
  auto te = r.header("Transfer-Encoding");
  if (te && te->find("chunked") != std::string::npos)
    r.body = decode_chunked(rest);
  else if (auto cl = r.header("Content-Length"))
    r.body = std::string(rest.substr(0, std::stoul(*cl)));
  else
    r.body = std::string(rest);
  return r;
}

std::string request_head(const std::string& method, const std::string& target) {
  return method + " " + target + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n";
}

} // namespace

HttpResponse http_request(int port, const std::string& method, const std::string& target,
                          const std::string& body, Millis timeout) {
  std::string req = request_head(method, target);
  if (!body.empty() || method == "POST" || method == "PUT")
    req += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  return exchange(port, method, target, req + "\r\n" + body, timeout);
}

HttpResponse http_request_chunked(int port, const std::string& method, const std::string& target,
                                  const std::string& body, std::size_t chunk_size, Millis timeout) {
  std::string req = request_head(method, target) + "Transfer-Encoding: chunked\r\n\r\n";
  char size[32];
  for (std::size_t at = 0; at < body.size(); at += chunk_size) {
    std::size_t n = std::min(chunk_size, body.size() - at);
    std::snprintf(size, sizeof size, "%zx\r\n", n);
    req.append(size).append(body, at, n).append("\r\n");
  }
  return exchange(port, method, target, req + "0\r\n\r\n", timeout);
}

} // namespace it
