#include "fcgi_host/runners/script_relay.hpp"

#include "fcgi_host/net/fd_flags.hpp"
#include "fcgi_host/observe/client_error_log.hpp"
#include "fcgi_host/protocol/record_guard.hpp"
#include "fcgi_host/protocol/records.hpp"
#include "fcgi_host/protocol/request_decoder.hpp"
#include "fcgi_host/protocol/stdin_stream.hpp"
#include "fcgi_host/runners/script_gate.hpp"
#include "fcgi_host/sandbox/sandbox.hpp"
#include "fcgi_host/sys_error.hpp"
#include "fcgi_host/worker/connection_policy.hpp" // kDrainNs
#include "fcgi_host/worker/handed_logs.hpp"
#include "fcgi_host/worker/worker_signals.hpp"
#include "process_manager/clock.hpp"
#include "process_manager/exit_codes.hpp"
#include "process_manager/fork_clean.hpp"
#include "process_manager/log.hpp"
#include "process_manager/rate_limited_log.hpp"
#include "process_manager/scoreboard.hpp"
#include "process_manager/signal_pipe.hpp"
#include "process_manager/single_writer.hpp"

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <optional>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fcgi_host {

using process_manager::LogLevel;
using process_manager::WorkerState;
namespace exit_code = process_manager::exit_code;
namespace rec = records;

namespace {

// A buffer of this much unsent data stops reading from the side that fills it.
constexpr std::size_t kHighWater = 256 * 1024;
// How long a program that closed its connection has to exit before it is killed.
constexpr int kExitGraceMs = 2000;

// What the master asks of the relay, read from the house's signalfd (WorkerSignals) as a
// worker reads it: TERM lets the request in flight finish, QUIT stops at once, USR1 takes the
// reopened logs.
class RelaySignals {
public:
  enum class Stop { None, Drain, Now };

  explicit RelaySignals(int log_channel) : log_channel_(log_channel) {}
  // False with `error` set when the signalfd could not be opened.
  bool open(std::string& error) {
    const char* call = "signalfd";
    if (signals_.open(call)) return true;
    error = sys_error(call, "TERM, QUIT, USR1");
    return false;
  }
  int fd() const { return signals_.fd(); }
  Stop stop() const { return stop_; }
  void take() {
    while (int signo = signals_.take()) {
      if (signo == SIGTERM && stop_ == Stop::None) stop_ = Stop::Drain;
      if (signo == SIGQUIT) stop_ = Stop::Now;
      if (signo == SIGUSR1) {
        try {
          take_handed_logs(log_channel_);
        } catch (const std::exception& e) {
          PM_LOG(LogLevel::Error, e.what());
        }
      }
    }
  }

private:
  WorkerSignals signals_;
  int log_channel_;
  Stop stop_ = Stop::None;
};

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
  // The program closed its connection: it is exiting (php-cgi after its last request). One that
  // lives on without it (it dropped the connection on a record it did not expect) is killed
  // after kExitGraceMs, so that the worker ends either way and the master starts a new one.
  int wait_for_exit() {
    OwnedFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid_, 0)));
    if (pidfd.get() >= 0) {
      pollfd p{pidfd.get(), POLLIN, 0};
      while (::poll(&p, 1, kExitGraceMs) < 0 && errno == EINTR) {}
      if (p.revents == 0) {
        PM_LOG(LogLevel::Warn, "--exec relay: the program closed its connection but did not "
                               "exit; killed");
        ::kill(pid_, SIGKILL);
      }
    }
    return wait();
  }
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

// Starts the program on `listener` (its fd 0) through the house's fork, with the signals the
// relay reads from its signalfd unblocked again: the program gets them as any program would.
// In the child: never returns.
pid_t start_program(const process_manager::WorkerContext& context, const ExecSettings& settings,
                    int listener) {
  return process_manager::fork_clean([&](const sigset_t& parent_mask) {
    // The program serves the relay only: it dies with it.
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    sigset_t mask = parent_mask;
    for (int signo : {SIGTERM, SIGQUIT, SIGUSR1})
      ::sigdelset(&mask, signo);
    process_manager::restore_signal_mask(mask);
    _exit(exec_program(context, settings, listener));
  });
}

bool send_some(int fd, std::string& pending) {
  ssize_t n = ::send(fd, pending.data(), pending.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  if (n > 0) pending.erase(0, static_cast<std::size_t>(n));
  return n >= 0 || errno == EAGAIN || errno == EINTR;
}

// Appends what `fd` has to `into`: false at the end of the stream or on an error.
bool receive_some(int fd, std::string& into) {
  char buf[16384];
  ssize_t n = ::recv(fd, buf, sizeof buf, MSG_DONTWAIT);
  if (n > 0) into.append(buf, static_cast<std::size_t>(n));
  return n > 0 || (n < 0 && (errno == EAGAIN || errno == EINTR));
}

// What every relayed connection shares.
struct Relay {
  const ScriptGate& gate;
  const RequestLimits& limits;               // a plugin worker's, for the client's requests
  process_manager::RateLimitedLog& refusals; // scripts refused
  ClientErrorLog& client_errors;             // requests the record guard refused
  unsigned long& requests_left;              // for the program (0: no limit); the last one closes
  process_manager::WorkerSlot& slot;
  RelaySignals& signals;
};

// One client connection, relayed request by request. The client's side is framed and checked by
// the record guard as a plugin worker's is (every --max-* limit, the same refusals); a body still
// on its way when the params end goes on to the program as it arrives, record by record, through
// StdinStream (the guard's checks of a body).
class RelayedConnection {
public:
  enum class Outcome { Closed, ProgramGone };

  RelayedConnection(int client, int upstream, Relay& relay)
      : client_(client), upstream_(upstream), relay_(relay), guard_(relay.limits, {1, 1}) {}

  Outcome run() {
    for (;;) {
      if (relay_.signals.stop() == RelaySignals::Stop::Now) return Outcome::Closed;
      if (program_gone_ && (to_client_.empty() || !client_alive_)) return Outcome::ProgramGone;
      const bool stopping = relay_.signals.stop() != RelaySignals::Stop::None;
      const bool idle = phase_ == Phase::Head || phase_ == Phase::Done;
      if (idle && (stopping || client_eof_ || phase_ == Phase::Done || program_gone_) &&
          (to_client_.empty() || !client_alive_)) {
        if (refused_ && client_alive_) drain_client();
        return Outcome::Closed;
      }
      pollfd fds[3] = {{client_, 0, 0}, {upstream_, 0, 0}, {relay_.signals.fd(), POLLIN, 0}};
      bool reading_client = !client_eof_ && !program_gone_ &&
                            (phase_ == Phase::Head || phase_ == Phase::Body) &&
                            to_upstream_.size() < kHighWater;
      if (reading_client) fds[0].events |= POLLIN;
      if (client_alive_ && !to_client_.empty()) fds[0].events |= POLLOUT;
      if (!program_gone_ && to_client_.size() < kHighWater) fds[1].events |= POLLIN;
      if (!program_gone_ && !to_upstream_.empty()) fds[1].events |= POLLOUT;
      if (::poll(fds, 3, -1) < 0) {
        if (errno == EINTR) continue;
        return Outcome::ProgramGone;
      }
      if (fds[2].revents != 0) relay_.signals.take();
      if (client_alive_ && (fds[0].revents & POLLOUT) && !send_some(client_, to_client_))
        client_gone();
      if (reading_client && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) &&
          !receive_some(client_, from_client_))
        client_eof();
      take_client_bytes();
      if ((fds[1].revents & POLLOUT) && !send_some(upstream_, to_upstream_)) program_gone_ = true;
      if ((fds[1].revents & (POLLIN | POLLHUP | POLLERR)) && !receive_from_program())
        program_gone_ = true;
      take_program_records();
      take_client_bytes(); // the next request, if it came with the last one
      const std::uint64_t now = process_manager::monotonic_ns();
      relay_.refusals.flush_due(now, LogLevel::Warn, "refused scripts");
      relay_.client_errors.flush_due(now);
    }
  }

private:
  enum class Phase {
    Head, // the record guard frames the next request up to its params (or all of it)
    Body, // the rest of the request's body, through body_: to the program, or dropped
    Wait, // the request is the program's: forwarding its answer
    Done, // the client asked for no more requests: flush and close
  };

  // The client sends no more: a request in its body still gets its answer.
  void client_eof() {
    client_eof_ = true;
    // The program must see its request end to finish it: an empty STDIN for an unfinished body.
    if (phase_ == Phase::Body && program_has_request_) {
      rec::append_record(to_upstream_, rec::Type::Stdin, id_, {});
      phase_ = Phase::Wait;
    }
    if (phase_ != Phase::Wait) phase_ = Phase::Done;
  }

  // The client cannot be written to: the answer in flight is dropped as it comes.
  void client_gone() {
    client_alive_ = false;
    to_client_.clear();
    client_eof();
  }

  void take_client_bytes() {
    for (bool more = true; more && !client_eof_;) {
      if (phase_ == Phase::Head)
        more = take_head();
      else if (phase_ == Phase::Body)
        more = take_body();
      else
        more = false;
    }
  }

  // False when the guard needs more bytes, or the connection ends.
  bool take_head() {
    std::size_t size = from_client_.size();
    const RecordGuard::Verdict verdict = guard_.advance(from_client_.data(), size, to_client_);
    from_client_.resize(size);
    switch (verdict) {
    case RecordGuard::Verdict::NeedMore:
      if (!guard_.params_done()) return false;
      guard_.streamed_body(); // the rest of the body goes to the program as it arrives
      begin_request(false);
      return true;
    case RecordGuard::Verdict::RequestReady:
      begin_request(true);
      return true;
    case RecordGuard::Verdict::Reject:
      reject(guard_.request_id(), guard_.error_status(), guard_.close_reason());
      return false;
    case RecordGuard::Verdict::Close:
      protocol_error(guard_.close_reason());
      return false;
    }
    return false;
  }

  // The guard's request, [request_begin(), request_end()): whole, or its body still to come.
  void begin_request(bool whole) {
    id_ = guard_.request_id();
    keep_conn_ = guard_.keep_connection();
    program_has_request_ = false;
    const std::size_t end = guard_.request_end();
    if (guard_.aborted()) {
      // FCGI_ABORT_REQUEST before the request ended: it ends here, the program never sees it.
      rec::append_end_request(to_client_, id_, 0, rec::ProtocolStatus::RequestComplete);
      return request_read(end);
    }
    const RequestFraming framing = guard_.framing();
    const std::size_t begin = guard_.request_begin();
    if (decode_guarded_request(from_client_.data() + begin, end - begin, framing, decoded_) !=
        DecodeStatus::Whole)
      return protocol_error("a request other than the record guard framed");
    const std::string_view params(decoded_.params_base, framing.params->size);
    std::string why;
    std::string script = ScriptGate::requested_script(params, why);
    if (why.empty()) why = relay_.gate.refusal(script);
    if (!why.empty()) {
      refuse_script(why);
    } else {
      // The program's connection is kept for the next request whatever the client asked.
      rec::append_begin_request(to_upstream_, id_, rec::Role::Responder, rec::kKeepConn);
      rec::append_stream(to_upstream_, rec::Type::Params, id_, params);
      for (std::string_view chunk : decoded_.body)
        rec::append_record(to_upstream_, rec::Type::Stdin, id_, chunk);
      program_has_request_ = true;
      publish(*framing.params, decoded_.params_base);
      if (relay_.requests_left > 0 && --relay_.requests_left == 0) keep_conn_ = false;
    }
    if (whole) return end_of_body(end);
    body_.emplace(StdinStream::Start{id_, guard_.body_size(), framing.params->content_length,
                                     relay_.limits.max_body});
    from_client_.erase(0, end); // what follows is the rest of the body
    phase_ = Phase::Body;
  }

  // The rest of a body, as it arrives: its content to the program in STDIN records of its own
  // (dropped for a refused script). False when it needs more bytes.
  bool take_body() {
    std::size_t at = 0;
    while (at < from_client_.size() && !body_->done()) {
      if (body_->state() == StdinStream::State::Content) {
        const std::size_t n = std::min(body_->content_left(), from_client_.size() - at);
        if (program_has_request_)
          rec::append_record(to_upstream_, rec::Type::Stdin, id_, {from_client_.data() + at, n});
        body_->took_content(n);
        at += n;
      } else {
        at += body_->take_framing(from_client_.data() + at, from_client_.size() - at);
      }
    }
    from_client_.erase(0, at);
    switch (body_->state()) {
    case StdinStream::State::Framing:
    case StdinStream::State::Content:
      return false;
    case StdinStream::State::End:
      end_of_body(0);
      return true;
    case StdinStream::State::Aborted:
      // A program that has begun ends the request itself, as the client asked.
      if (program_has_request_)
        rec::append_record(to_upstream_, rec::Type::AbortRequest, id_, {});
      else
        rec::append_end_request(to_client_, id_, 0, rec::ProtocolStatus::RequestComplete);
      request_read(0);
      return true;
    case StdinStream::State::Refused:
      reject(id_, body_->status(), body_->reason());
      return false;
    case StdinStream::State::Broken:
      protocol_error(body_->reason());
      return false;
    }
    return false;
  }

  // The body ended: the program gets its end (a refused script's body was dropped).
  void end_of_body(std::size_t end) {
    if (program_has_request_) rec::append_record(to_upstream_, rec::Type::Stdin, id_, {});
    request_read(end);
  }

  // The request is all read: its bytes, data[0, end), leave the buffer, and the connection
  // waits for the program's answer, reads the next request, or ends.
  void request_read(std::size_t end) {
    release_answer();
    answer_released_ = false;
    body_.reset();
    guard_.consume_request();
    from_client_.erase(0, end);
    phase_ = program_has_request_         ? Phase::Wait
             : keep_conn_ && !client_eof_ ? Phase::Head
                                          : Phase::Done;
  }

  void refuse_script(const std::string& why) {
    rec::append_error_response(to_client_, id_, 404);
    relay_.refusals.write(LogLevel::Warn, "script refused with 404: " + why,
                          process_manager::monotonic_ns());
  }

  // The guard's refusal (a limit, a malformed param): the error page and the line a plugin
  // worker gives, then the connection closes. A program that has begun the request gets its end,
  // and its answer is dropped.
  void reject(std::uint16_t id, int status, const std::string& reason) {
    // Unless part of the program's answer went out already (then the close cuts it).
    held_answer_.clear();
    if (!answer_released_) rec::append_error_response(to_client_, id, status);
    relay_.client_errors.write(ClientErrorLog::Kind::Request,
                               "request refused with " + std::to_string(status) + ": " + reason);
    client_eof_ = true;
    keep_conn_ = false;
    refused_ = true;
    body_.reset();
    if (program_has_request_) {
      rec::append_record(to_upstream_, rec::Type::Stdin, id_, {});
      answer_dropped_ = true;
      phase_ = Phase::Wait;
    } else {
      phase_ = Phase::Done;
    }
  }

  // After a refusal, as a plugin worker does: the client may still be sending, and a close with
  // its bytes unread would be a reset that could cost it the answer. They are read and dropped
  // until it closes, for kDrainNs at most.
  void drain_client() {
    ::shutdown(client_, SHUT_WR);
    const std::uint64_t until = process_manager::monotonic_ns() + kDrainNs;
    char buf[16384];
    for (std::uint64_t now; (now = process_manager::monotonic_ns()) < until;) {
      pollfd p{client_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>((until - now) / 1'000'000 + 1)) <= 0) continue;
      const ssize_t n = ::recv(client_, buf, sizeof buf, MSG_DONTWAIT);
      if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return;
    }
  }

  void protocol_error(const std::string& why) {
    relay_.client_errors.write(ClientErrorLog::Kind::Connection,
                               "script relay: " + why + "; connection closed");
    client_gone();
  }

  // The request as the status page and --request-timeout see it, in the worker's request slot,
  // as a plugin worker publishes it.
  void publish(const ScannedParams& params, const char* base) {
    auto value = [&](std::size_t noted) {
      const std::uint32_t at = params.noted[noted];
      return at ? params.pair(base, at - 1).value : std::string_view{};
    };
    std::string_view method = value(kRequestMethod), uri = value(kRequestUri);
    if (uri.empty()) uri = value(kScriptName);
    const std::string_view id = value(kRequestId);
    process_manager::RequestSlot& request = relay_.slot.request(0);
    process_manager::Scoreboard::set_request(request, method.data(), method.size(), uri.data(),
                                             uri.size(), id);
    request.queue_ns.store(-1, std::memory_order_relaxed);
    request.request_start_ns.store(process_manager::monotonic_ns(), std::memory_order_relaxed);
    // Before the program's first answer the slot stays Starting: that answer makes it ready.
    if (relay_.slot.state.load(std::memory_order_relaxed) != WorkerState::Starting)
      relay_.slot.state.store(WorkerState::Handling, std::memory_order_relaxed);
  }

  // The program answered: its request is over, for the slot too.
  // The program answered its request: over, for the slot too. An answer before the body ended
  // (a script that does not read it) leaves the rest of the body to be read and dropped.
  void program_answered() {
    relay_.slot.request(0).request_start_ns.store(0, std::memory_order_relaxed);
    process_manager::single_writer_add(relay_.slot.requests, 1);
    // The program serves: proof of readiness, no guess by the boot window (a program recycled
    // after a few quick requests is no boot failure).
    relay_.slot.state.store(WorkerState::Idle, std::memory_order_relaxed);
    answer_dropped_ = false;
    program_has_request_ = false;
    if (phase_ == Phase::Wait) phase_ = keep_conn_ && !client_eof_ ? Phase::Head : Phase::Done;
  }

  // What the program answered so far goes to the client.
  void release_answer() {
    to_client_ += held_answer_;
    held_answer_.clear();
    answer_released_ = true;
  }

  bool receive_from_program() {
    received_.clear();
    const bool open = receive_some(upstream_, received_);
    from_program_.append(received_);
    return open;
  }

  void take_program_records() {
    rec::RecordView r;
    while (from_program_.next(r)) {
      if (client_alive_ && !answer_dropped_) {
        // Held while the body is still read, so that a refusal of the body is answered as a
        // plugin worker answers it; an answer of kHighWater before that goes out as it comes.
        const bool hold = phase_ == Phase::Body && !answer_released_;
        rec::append_record(hold ? held_answer_ : to_client_, static_cast<rec::Type>(r.header.type),
                           r.header.request_id, r.content);
        if (held_answer_.size() >= kHighWater) release_answer();
      }
      if (r.header.is(rec::Type::EndRequest) && r.header.request_id == id_ && program_has_request_)
        program_answered();
    }
  }

  int client_;
  int upstream_;
  Relay& relay_;
  RecordGuard guard_;
  DecodedRequest decoded_;
  std::optional<StdinStream> body_; // in Phase::Body
  Phase phase_ = Phase::Head;
  bool client_alive_ = true;         // the client can be written to
  bool client_eof_ = false;          // the client sent its last byte (or is read no more)
  bool program_gone_ = false;        // the program closed its connection (it exited)
  bool program_has_request_ = false; // the program was sent the current request
  bool answer_dropped_ = false;      // the client was answered by the host instead
  bool answer_released_ = false;     // the program's answer goes out as it comes
  bool refused_ = false;             // the guard refused the request: drained, then closed
  bool keep_conn_ = false;
  std::uint16_t id_ = 0;
  std::string from_client_, to_client_, to_upstream_;
  std::string received_;    // the program's last bytes, on their way into from_program_
  std::string held_answer_; // the program's answer while the body is still read
  rec::RecordReader from_program_;
};

} // namespace

int run_script_relay(const process_manager::WorkerContext& context, const ExecSettings& settings) {
  std::string error;
  ScriptGate gate(settings.script, error);
  if (!error.empty()) return process_manager::boot_failure(context, "--exec: " + error);
  OwnedFd listener, upstream;
  if (!private_channel(listener, upstream, error))
    return process_manager::boot_failure(context, "--exec: relay: " + error);
  // TERM (retire, stop) is read between requests; the request in flight is finished first.
  RelaySignals signals(context.log_channel);
  if (!signals.open(error))
    return process_manager::boot_failure(context, "--exec: relay: " + error);

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
  ClientErrorLog client_errors;
  Relay relay{gate,          settings.request, refusals, client_errors,
              requests_left, context.slot,     signals};
  while (signals.stop() == RelaySignals::Stop::None) {
    if (limited && requests_left == 0) break; // the program served its last request
    // The program's end (it exited, or never started: a boot failure) closes its connection.
    pollfd fds[3] = {
        {settings.listen_fd, POLLIN, 0}, {upstream.get(), POLLIN, 0}, {signals.fd(), POLLIN, 0}};
    if (::poll(fds, 3, -1) < 0) continue; // EINTR
    if (fds[2].revents != 0) {
      signals.take();
      continue;
    }
    if (fds[1].revents != 0) {
      upstream.reset();
      return program.wait_for_exit();
    }
    if (!(fds[0].revents & POLLIN)) continue;
    OwnedFd client(::accept4(settings.listen_fd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (client.get() < 0) {
      if (errno == EINTR || errno == ECONNABORTED || errno == EAGAIN) continue;
      PM_LOG(LogLevel::Error, "--exec relay: " + sys_error("accept", "listen socket"));
      return exit_code::kWorkerError;
    }
    RelayedConnection c(client.get(), upstream.get(), relay);
    if (c.run() == RelayedConnection::Outcome::ProgramGone) {
      client.reset();
      upstream.reset();
      return program.wait_for_exit();
    }
  }
  return exit_code::kWorkerDone;
}

} // namespace fcgi_host
