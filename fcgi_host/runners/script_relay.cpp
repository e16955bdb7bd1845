#include "fcgi_host/runners/script_relay.hpp"

#include "fcgi_host/net/fd_flags.hpp"
#include "fcgi_host/protocol/records.hpp"
#include "fcgi_host/runners/script_gate.hpp"
#include "fcgi_host/sandbox/sandbox.hpp"
#include "fcgi_host/sys_error.hpp"
#include "process_manager/clock.hpp"
#include "process_manager/exit_codes.hpp"
#include "process_manager/log.hpp"
#include "process_manager/rate_limited_log.hpp"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fcgi_host {

using process_manager::LogLevel;
namespace exit_code = process_manager::exit_code;
namespace rec = records;

namespace {

// A buffer of this much unsent data stops reading from the side that fills it.
constexpr std::size_t kHighWater = 256 * 1024;

volatile sig_atomic_t g_stop = 0;
void on_stop(int) {
  g_stop = 1;
}

class OwnedFd {
public:
  explicit OwnedFd(int fd = -1) : fd_(fd) {}
  OwnedFd(const OwnedFd&) = delete;
  OwnedFd& operator=(const OwnedFd&) = delete;
  ~OwnedFd() { reset(); }
  int get() const { return fd_; }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }

private:
  int fd_;
};

// The program, a child of the relay: killed and reaped when the relay is done with it.
class Program {
public:
  Program() = default;
  Program(const Program&) = delete;
  Program& operator=(const Program&) = delete;
  ~Program() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      wait();
    }
  }
  void started(pid_t pid) { pid_ = pid; }
  // The program's exit as a worker exit code (a signal: 128 + its number).
  int wait() {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {}
    pid_ = -1;
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    return WIFSIGNALED(status) ? 128 + WTERMSIG(status) : exit_code::kWorkerError;
  }

private:
  pid_t pid_ = -1;
};

// The private listening socket and the relay's one connection to it; the socket's file and its
// directory are gone once connected. `error` names the failed call.
bool private_channel(OwnedFd& listener, OwnedFd& upstream, std::string& error) {
  // $TMPDIR is the starting process's, which the workers' user may not write (the master's own
  // 0700 or 0711 directory): /tmp then, whose sticky bit keeps the directory ours.
  const char* tmp = std::getenv("TMPDIR");
  std::string dir;
  for (std::string base : {std::string(tmp && *tmp == '/' ? tmp : ""), std::string("/tmp")}) {
    if (base.empty()) continue;
    dir = base + "/fcgi-host-relay-XXXXXX";
    if (::mkdtemp(dir.data())) break;
    error = sys_error("mkdtemp", dir);
    dir.clear();
  }
  if (dir.empty()) return false;
  error.clear();
  std::string path = dir + "/s";
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  bool ok = path.size() < sizeof addr.sun_path;
  if (!ok) error = "relay socket path too long: " + path;
  if (ok) {
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    listener.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    upstream.reset(::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    auto* sa = reinterpret_cast<const sockaddr*>(&addr);
    if (listener.get() < 0 || upstream.get() < 0)
      error = sys_error("socket", "relay"), ok = false;
    else if (::bind(listener.get(), sa, sizeof addr) != 0)
      error = sys_error("bind", path), ok = false;
    else if (::listen(listener.get(), 1) != 0)
      error = sys_error("listen", path), ok = false;
    else if (::connect(upstream.get(), sa, sizeof addr) != 0)
      error = sys_error("connect", path), ok = false;
  }
  ::unlink(path.c_str());
  ::rmdir(dir.c_str());
  return ok;
}

// php-cgi's own recycling (PHP_FCGI_MAX_REQUESTS, 500 when unset) would close the program's
// connection between two requests, and a request the relay had just sent would be lost. The
// relay counts instead: the program gets 0 (no limit of its own), and the relay's worker ends
// after that many requests (0: never), as a worker of --max-requests does.
unsigned long take_program_request_limit() {
  unsigned long limit = 500;
  if (const char* v = std::getenv("PHP_FCGI_MAX_REQUESTS"); v && *v) {
    char* end = nullptr;
    unsigned long n = std::strtoul(v, &end, 10);
    if (*end == '\0') limit = n;
  }
  ::setenv("PHP_FCGI_MAX_REQUESTS", "0", 1);
  return limit;
}

// Starts the program on `listener` (its fd 0). In the child: never returns.
pid_t start_program(const process_manager::WorkerContext& context, const ExecSettings& settings,
                    int listener) {
  pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::signal(SIGTERM, SIG_DFL);
  // The program serves the relay only: it dies with it.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  _exit(exec_program(context, settings, listener));
}

bool send_some(int fd, std::string& pending) {
  ssize_t n = ::send(fd, pending.data(), pending.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n > 0) pending.erase(0, static_cast<std::size_t>(n));
  return n >= 0 || errno == EAGAIN || errno == EINTR;
}

// Appends what `fd` has to `reader`: false at the end of the stream or on an error.
bool receive_some(int fd, rec::RecordReader& reader) {
  char buf[16384];
  ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
  if (n > 0) reader.append(std::string_view(buf, static_cast<std::size_t>(n)));
  return n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR));
}

// One client connection, relayed request by request.
class Connection {
public:
  enum class Outcome { Closed, ProgramGone };

  // `requests_left`: how many more requests the program may get (0: no limit); the connection
  // closes after the last one.
  // `slot`: the worker's, marked ready (Idle) when the program has answered a request.
  Connection(int client, int upstream, const ScriptGate& gate,
             process_manager::RateLimitedLog& refusals, unsigned long& requests_left,
             process_manager::WorkerSlot& slot)
      : client_(client), upstream_(upstream), gate_(gate), refusals_(refusals),
        requests_left_(requests_left), slot_(slot) {}

  Outcome run() {
    for (;;) {
      if (program_gone_ && (to_client_.empty() || !client_alive_)) return Outcome::ProgramGone;
      bool idle = phase_ == Phase::Head || phase_ == Phase::Done;
      if (idle && (g_stop || client_eof_ || phase_ == Phase::Done || program_gone_) &&
          (to_client_.empty() || !client_alive_))
        return Outcome::Closed;
      pollfd fds[2] = {{client_, 0, 0}, {upstream_, 0, 0}};
      bool reading_client = !client_eof_ && !program_gone_ && phase_ != Phase::Wait &&
                            phase_ != Phase::Done && to_upstream_.size() < kHighWater;
      if (reading_client) fds[0].events |= POLLIN;
      if (client_alive_ && !to_client_.empty()) fds[0].events |= POLLOUT;
      if (!program_gone_ && to_client_.size() < kHighWater) fds[1].events |= POLLIN;
      if (!program_gone_ && !to_upstream_.empty()) fds[1].events |= POLLOUT;
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        return Outcome::ProgramGone;
      }
      if (client_alive_ && (fds[0].revents & POLLOUT) && !send_some(client_, to_client_))
        client_gone();
      if (reading_client && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) &&
          !receive_some(client_, from_client_))
        client_eof();
      take_client_records();
      if ((fds[1].revents & POLLOUT) && !send_some(upstream_, to_upstream_)) program_gone_ = true;
      if ((fds[1].revents & (POLLIN | POLLHUP | POLLERR)) &&
          !receive_some(upstream_, from_upstream_))
        program_gone_ = true;
      take_program_records();
      take_client_records(); // the next request, if it came with the last one
      refusals_.flush_due(process_manager::monotonic_ns(), LogLevel::Warn, "refused scripts");
    }
  }

private:
  enum class Phase {
    Head,    // reading BEGIN_REQUEST and the params of the next request
    Body,    // forwarding the request's STDIN to the program
    Wait,    // the request is the program's: forwarding its answer
    Discard, // refused: dropping the request's STDIN
    Done,    // the client asked for no more requests: flush and close
  };

  // The client sends no more: a request in its body still gets its answer.
  void client_eof() {
    client_eof_ = true;
    // The program must see its request end to finish it: an empty STDIN for an unfinished body.
    if (phase_ == Phase::Body) {
      rec::append_record(to_upstream_, rec::Type::Stdin, id_, {});
      phase_ = Phase::Wait;
    }
    if (phase_ == Phase::Discard || phase_ == Phase::Head) phase_ = Phase::Done;
  }

  // The client cannot be written to: the answer in flight is dropped as it comes.
  void client_gone() {
    client_alive_ = false;
    to_client_.clear();
    client_eof();
  }

  void take_client_records() {
    rec::RecordView r;
    while (!client_eof_ &&
           (phase_ == Phase::Head || phase_ == Phase::Body || phase_ == Phase::Discard) &&
           from_client_.next(r)) {
      if (r.header.request_id == rec::kNullRequestId) {
        management(r);
        continue;
      }
      if (phase_ == Phase::Head) {
        head(r);
        continue;
      }
      if (r.header.request_id != id_) continue; // no multiplexing: another id is dropped
      bool end = (r.header.is(rec::Type::Stdin) && r.content.empty()) ||
                 r.header.is(rec::Type::AbortRequest);
      if (phase_ == Phase::Body)
        rec::append_record(to_upstream_, static_cast<rec::Type>(r.header.type), id_, r.content);
      if (!end) continue;
      if (phase_ == Phase::Body) {
        phase_ = Phase::Wait;
      } else {
        phase_ = keep_conn_ ? Phase::Head : Phase::Done;
      }
    }
  }

  void head(const rec::RecordView& r) {
    if (r.header.is(rec::Type::BeginRequest)) {
      rec::BeginRequest begin;
      if (!rec::decode_begin_request(r.content, begin)) return protocol_error();
      id_ = r.header.request_id;
      begin_ = begin;
      keep_conn_ = begin.keep_conn();
      begun_ = true;
      params_.clear();
      return;
    }
    if (!begun_ || !r.header.is(rec::Type::Params) || r.header.request_id != id_)
      return protocol_error();
    if (!r.content.empty()) {
      params_.append(r.content);
      return;
    }
    begun_ = false;
    std::string why;
    std::string script = ScriptGate::requested_script(params_, why);
    if (why.empty()) why = gate_.refusal(script);
    if (!why.empty()) {
      refuse(why);
      return;
    }
    // The program's connection is kept for the next request whatever the client asked.
    rec::append_begin_request(to_upstream_, id_, static_cast<rec::Role>(begin_.role),
                              static_cast<std::uint8_t>(begin_.flags | rec::kKeepConn));
    rec::append_stream(to_upstream_, rec::Type::Params, id_, params_);
    params_.clear();
    phase_ = Phase::Body;
    if (requests_left_ > 0 && --requests_left_ == 0) keep_conn_ = false;
  }

  void refuse(const std::string& why) {
    rec::append_error_response(to_client_, id_, 404);
    refusals_.write(LogLevel::Warn, "script refused with 404: " + why,
                    process_manager::monotonic_ns());
    params_.clear();
    phase_ = Phase::Discard;
  }

  // GET_VALUES: one request at a time on one connection; any other management type is unknown.
  void management(const rec::RecordView& r) {
    if (!r.header.is(rec::Type::GetValues)) {
      rec::append_unknown_type(to_client_, r.header.type);
      return;
    }
    std::string pairs;
    rec::append_name_value(pairs, rec::kMaxConns, "1");
    rec::append_name_value(pairs, rec::kMaxReqs, "1");
    rec::append_name_value(pairs, rec::kMpxsConns, "0");
    rec::append_get_values_result(to_client_, pairs);
  }

  void protocol_error() {
    PM_LOG(LogLevel::Warn, "script relay: a client broke the FastCGI protocol; connection closed");
    client_gone();
  }

  void take_program_records() {
    rec::RecordView r;
    while (from_upstream_.next(r)) {
      if (client_alive_)
        rec::append_record(to_client_, static_cast<rec::Type>(r.header.type), r.header.request_id,
                           r.content);
      if (r.header.is(rec::Type::EndRequest) && r.header.request_id == id_ &&
          phase_ == Phase::Wait) {
        phase_ = keep_conn_ && !client_eof_ ? Phase::Head : Phase::Done;
        // The program serves: proof of readiness, no guess by the boot window (a program
        // recycled after a few quick requests is no boot failure).
        if (slot_.state.load(std::memory_order_relaxed) == process_manager::WorkerState::Starting)
          slot_.state.store(process_manager::WorkerState::Idle, std::memory_order_relaxed);
      }
    }
  }

  int client_;
  int upstream_;
  const ScriptGate& gate_;
  process_manager::RateLimitedLog& refusals_;
  unsigned long& requests_left_;
  process_manager::WorkerSlot& slot_;
  Phase phase_ = Phase::Head;
  bool client_alive_ = true;  // the client can be written to
  bool client_eof_ = false;   // the client sent its last byte
  bool program_gone_ = false; // the program closed its connection (it exited)
  bool keep_conn_ = false;
  bool begun_ = false; // BEGIN_REQUEST read, its params not complete yet
  std::uint16_t id_ = 0;
  rec::BeginRequest begin_;
  std::string params_;
  rec::RecordReader from_client_, from_upstream_;
  std::string to_client_, to_upstream_;
};

} // namespace

int run_script_relay(const process_manager::WorkerContext& context, const ExecSettings& settings) {
  std::string error;
  ScriptGate gate(settings.script, error);
  if (!error.empty()) return process_manager::boot_failure(context, "--exec: " + error);
  OwnedFd listener, upstream;
  if (!private_channel(listener, upstream, error))
    return process_manager::boot_failure(context, "--exec: relay: " + error);

  // TERM (retire, stop) interrupts a wait; the request in flight is finished first.
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  ::sigaction(SIGTERM, &sa, nullptr);

  unsigned long requests_left = take_program_request_limit();
  const bool limited = requests_left > 0;
  Program program;
  pid_t pid = start_program(context, settings, listener.get());
  if (pid < 0) return process_manager::boot_failure(context, "--exec: " + sys_error("fork", ""));
  program.started(pid);
  listener.reset();
  if (settings.sandbox.enabled()) {
    // The relay parses what clients send: it is confined too (no exec, reads as listed).
    SandboxResult sandbox = enter_sandbox(settings.sandbox);
    if (!sandbox.error.empty())
      return process_manager::boot_failure(context, "--exec: relay sandbox: " + sandbox.error);
  }
  set_nonblocking(upstream.get(), true);

  process_manager::RateLimitedLog refusals;
  while (!g_stop) {
    if (limited && requests_left == 0) break; // the program served its last request
    // The program's end (it exited, or never started: a boot failure) closes its connection.
    pollfd fds[2] = {{settings.listen_fd, POLLIN, 0}, {upstream.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) continue; // EINTR: TERM, seen above
    if (fds[1].revents != 0) {
      upstream.reset();
      return program.wait();
    }
    if (!(fds[0].revents & POLLIN)) continue;
    OwnedFd client(::accept4(settings.listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (client.get() < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN) continue;
      PM_LOG(LogLevel::Error, "--exec relay: " + sys_error("accept", "listen socket"));
      return exit_code::kWorkerError;
    }
    Connection c(client.get(), upstream.get(), gate, refusals, requests_left, context.slot);
    if (c.run() == Connection::Outcome::ProgramGone) {
      client.reset();
      upstream.reset();
      return program.wait();
    }
  }
  return exit_code::kWorkerDone;
}

} // namespace fcgi_host
