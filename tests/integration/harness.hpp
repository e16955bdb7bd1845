#pragma once
// Integration harness: the real fcgi-host binary (host_process.cpp), a real nginx
// (nginx_process.cpp), a tiny HTTP client (http_client.cpp), a temp dir, a free port and /proc
// helpers (scratch.cpp); child_process.cpp starts and reaps them. Helpers every test layer shares
// are in tests/support/ (waits, /proc, files, elapsed time, option lists).
// Every object here owns what it starts and removes it in its destructor, so a failing test leaves
// no process and no file behind.
//
// Defaults a new test gets without asking:
// - The host's log is checked when the HostProcess goes away: any [alert], [crit] or [emerg]
//   line, or any sanitizer line (AddressSanitizer, LeakSanitizer, UndefinedBehaviorSanitizer,
//   "runtime error:"), fails the test, with the lines quoted. A test that provokes such a line
//   declares it: `host.expect_log("regex")` (it must appear, and is then allowed) or
//   `host.allow_log("regex")` (it may appear), or up front in HostOptions (for run_host). The
//   --error-log file, when given, is read too.
// - Wait for events, never for time: `host.wait_log(regex)` for a log line,
//   `host.wait_workers(n)` / `wait_worker_replaced(pid, n)` for the pool, `host.wait_exit()` for
//   the master, and `test_wait::` (tests/support/wait.hpp) for a process exit, a file, a readable
//   socket. With `status_socket = true` (the master's own status socket, which answers while every
//   worker is busy): `host.wait_active(n)` (n workers inside a request), `wait_serving(uri)`,
//   `wait_accepted()` (the listen queue is empty: the kernel's accept(), not yet a request read;
//   for an --exec'd program, whose state the scoreboard cannot show, wait for what it says) and
//   `wait_master_turn()` (the master has looked at the state since: for "nothing more happens"
//   checks).
// - `test_wait::hold_for(d)` is the one way to spend time on purpose, for a delay that is the
//   scenario itself (a slow client); never to let something else happen.
#include "fcgi_host/testing/fcgi_test_client.hpp"
#include "support/files.hpp"
#include "support/options.hpp"
#include "support/time.hpp"
#include "support/wait.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <sys/types.h>
#include <thread>
#include <vector>

namespace it {

using fcgi_test::Millis;

using test_support::TempDir; // a fresh directory, removed with its contents

using test_support::read_file; // "" when missing
inline bool has(const std::string& text, const std::string& needle) {
  return text.find(needle) != std::string::npos;
}
// `s` with every `from` replaced by `to`.
std::string replace_all(std::string s, const std::string& from, const std::string& to);
// A pool's section of a pools config: its name, its socket in the test's directory, `body`.
inline std::string pool_section(const std::string& name, const std::string& body) {
  return "[" + name + "]\nlisten = unix:{dir}/" + name + ".sock\n" + body;
}
int free_tcp_port(); // a loopback port that was free a moment ago
// A number field of a JSON status page ("active processes":2); -1 when absent.
long json_number(const std::string& json, const std::string& field);

// A fixture program (FCGI_TEST_LIBFCGI_ECHO...) at a path the workers' user can run. The tests
// run as root in CI, so their workers run as nobody, who may not reach the build tree (a clone
// in /root or in a mkdtemp() directory is 0700): then a copy in this process's scratch $TMPDIR
// (0711, removed at exit), made once; as another user, `program` itself.
std::string workers_fixture(const std::string& program);

// ---- /proc -------------------------------------------------------------------------------------

// Alive and not a zombie.
inline bool process_alive(pid_t pid) {
  return test_wait::process_running(pid);
}
std::vector<pid_t> child_pids(pid_t parent);
std::vector<pid_t> pids_in_group(pid_t pgid); // live (non-zombie) members
// Whether `pid` has a file descriptor open on `path` (by /proc/PID/fd; a renamed file shows
// under its new name).
bool holds_open(pid_t pid, const std::string& path);
// Looks at `pred` every few ms until it holds or `timeout` passes; returns its last value.
template <class Pred> bool wait_for(Pred pred, Millis timeout) {
  return test_wait::wait_until(pred, timeout);
}

// ---- fcgi-host ---------------------------------------------------------------------------------

enum class Listen {
  UnixSocket, // adds --listen unix:<dir>/host.sock
  Tcp,        // adds --listen 127.0.0.1:<free port>
  AsGiven,    // nothing added; the address is taken from a --listen in args, if any
};

struct HostOptions {
  std::vector<std::string> args;            // "{dir}" in an argument becomes the temp dir
  std::map<std::string, std::string> files; // written to the temp dir first ("{dir}" replaced too)
  Listen listen = Listen::UnixSocket;
  bool wait_ready = true; // wait (10 s) until the socket accepts; throws with the log if not
  // Adds --status-listen unix:<dir>/status.sock: the master's status page, which answers while
  // every worker is busy (wait_active, status_json).
  bool status_socket = false;
  // The teardown's log check, declared up front (as expect_log and allow_log below); for
  // run_host, where the test never holds the HostProcess.
  std::vector<std::string> expect_log{};
  std::vector<std::string> allow_log{};
  // A program that runs the host (its words before the binary's path): `unshare --pid --fork`
  // makes the host PID 1 of a namespace. pid() is then the wrapper's.
  std::vector<std::string> wrapper{};
};

class HostProcess {
public:
  explicit HostProcess(HostOptions options);
  // Shorthand: a host on a fresh Unix socket with these arguments.
  explicit HostProcess(std::vector<std::string> args);
  ~HostProcess();
  HostProcess(const HostProcess&) = delete;
  HostProcess& operator=(const HostProcess&) = delete;

  static std::string binary(); // $FCGI_HOST_BINARY if set, else the build's FCGI_HOST_BINARY

  pid_t pid() const { return pid_; }
  const std::string& address() const { return address_; } // as passed to --listen
  const TempDir& dir() const { return dir_; }
  std::string log() const; // stdout and stderr of the host so far (and its --error-log file)
  std::string log_path() const { return dir_.file("host.log"); }
  // Waits until the log holds at least `count` lines matching `pattern` (a regex).
  bool wait_log(const std::string& pattern, Millis timeout = Millis{5000}, std::size_t count = 1);

  // The teardown's log check (see the top of this file): lines matching `pattern` are expected
  // (they must appear) or allowed (they may).
  void expect_log(const std::string& pattern) { expected_.push_back(pattern); }
  void allow_log(const std::string& pattern) { allowed_.push_back(pattern); }
  // Runs the check now (the destructor runs it too, once).
  void check_log();

  bool wait_ready(Millis timeout); // socket accepts; false if it exited or timed out
  void signal(int sig);
  // Exit status once the master has exited: its code, or 128 + signal; nullopt on timeout.
  std::optional<int> wait_exit(Millis timeout);
  bool exited() const { return exit_status_.has_value(); }

  fcgi_test::Client connect(Millis timeout = fcgi_test::kDefaultTimeout) const;
  // The master's current children but its molds (remembered, so the destructor can kill strays).
  std::vector<pid_t> worker_pids();
  // Its molds (--mold on: children named "fcgi-host mold").
  std::vector<pid_t> mold_pids();
  // Waits until exactly n workers run; returns them (empty on timeout).
  std::vector<pid_t> wait_workers(std::size_t n, Millis timeout = Millis{5000});
  // Waits until `old` is gone and n workers run again; returns them (empty on timeout).
  std::vector<pid_t> wait_worker_replaced(pid_t old, std::size_t n, Millis timeout = Millis{5000});

  // The master's JSON status page, with one entry per worker when `full` (needs status_socket);
  // "" when it does not answer.
  std::string status_json(bool full = false) const;
  // Waits, bounded by `timeout`, until the master's JSON status page satisfies `holds`, and
  // returns that page ("" on timeout). A request is counted after its response went out, so a
  // test that reads a counter after a response waits for the count it expects here, never reads
  // the page once.
  std::string wait_status(const std::function<bool(const std::string& json)>& holds,
                          Millis timeout = Millis{5000}, bool full = false) const;
  // The same for one number field of the page: until `field` is `value`.
  std::string wait_status(const std::string& field, long value, Millis timeout = Millis{5000},
                          bool full = false) const;
  // Waits until exactly n workers are inside a request (by the status page).
  bool wait_active(long n, Millis timeout = Millis{5000}) const;
  // Waits until a worker is inside a request for `uri` (by the full status page).
  bool wait_serving(const std::string& uri, Millis timeout = Millis{5000}) const;
  // Waits until the listen queue is empty: every connection made so far has been accepted by a
  // worker (by the status page; works for --exec programs, which have no scoreboard state).
  bool wait_accepted(Millis timeout = Millis{5000}) const;
  // Waits until the master has run whole turns of its loop after this call (it answers its status
  // socket between turns): whatever it would do about the state seen now (a timeout, a spawn) it
  // has done by then.
  bool wait_master_turn(Millis timeout = Millis{5000}) const;

private:
  TempDir dir_;
  std::string address_;
  pid_t pid_ = -1;
  std::optional<int> exit_status_;
  std::vector<pid_t> known_workers_;
  std::string error_log_;      // --error-log, if given
  std::string status_address_; // --status-listen, if given
  std::vector<std::string> expected_, allowed_;
  bool log_checked_ = false;
};

// Lines of a host log that need a person: [alert], [crit], [emerg], and sanitizer reports.
std::vector<std::string> alarming_lines(const std::string& log);

// Runs the host to completion (bounded), returning its exit status and output.
struct RunResult {
  int status = -1; // -1: still running at the timeout (then killed)
  std::string output;
};
RunResult run_host(HostOptions options, Millis timeout = Millis{10000});

// Lines of `log` containing `needle`.
using test_support::lines_with;

// ---- HTTP servers in front of the host (nginx, tests/integration/front_servers.hpp) -----------

// A web server of ours: spawned in its own process group (output to `out_log`, in `cwd`), ready
// once 127.0.0.1:port accepts; stopped with `stop_signal`, then killed whole. `describe` says what
// went wrong (its logs) when it does not start: the constructor then throws with it.
class ServerProcess {
public:
  ServerProcess(std::string name, const std::vector<std::string>& argv, const std::string& out_log,
                const std::string& cwd, int port, int stop_signal,
                const std::function<std::string()>& describe);
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;
  pid_t pid() const { return pid_; }

private:
  pid_t pid_ = -1;
  int stop_signal_;
};

// ---- nginx -------------------------------------------------------------------------------------

struct NginxOptions {
  std::string fastcgi_address; // "unix:/p", "/p" or "host:port"
  int upstream_keepalive = 0;  // > 0: upstream block with keepalive N and fastcgi_keep_conn on
  std::string client_max_body_size = "64m";
  // More locations beside `location /`: {prefix, fastcgi address} (several pools behind one
  // nginx).
  std::vector<std::pair<std::string, std::string>> locations{};
  std::string server_extra{}; // more directives for the server block (an internal location)
  // Lines of the http {} block before the server (an upstream of several hosts), and the body
  // of `location /` in place of the default fastcgi_pass to fastcgi_address.
  std::string upstream{};
  std::string location{};
};

class NginxProcess {
public:
  explicit NginxProcess(NginxOptions options);
  ~NginxProcess();
  NginxProcess(const NginxProcess&) = delete;
  NginxProcess& operator=(const NginxProcess&) = delete;

  int port() const { return port_; }
  pid_t pid() const { return server_->pid(); }
  std::string error_log() const;

private:
  TempDir dir_;
  int port_ = 0;
  std::unique_ptr<ServerProcess> server_;
};

// ---- HTTP/1.1 client (blocking, one request per connection) ---------------------------------

struct HttpResponse {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  std::optional<std::string> header(const std::string& name) const; // case-insensitive
};

// Throws fcgi_test::Error (or TimeoutError) on connection trouble or a malformed response.
HttpResponse http_request(int port, const std::string& method, const std::string& target,
                          const std::string& body = {}, Millis timeout = Millis{10000});
// The same with the body sent as `Transfer-Encoding: chunked`, in chunks of `chunk_size` bytes
// (no Content-Length): an upload of unknown length, as `curl -T -` sends it.
HttpResponse http_request_chunked(int port, const std::string& method, const std::string& target,
                                  const std::string& body, std::size_t chunk_size = 16384,
                                  Millis timeout = Millis{10000});

} // namespace it
