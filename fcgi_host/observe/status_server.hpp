#pragma once
// --status-listen: the master itself answers status and ping over FastCGI on a socket of its own,
// so the status page answers when every worker is busy or stuck (php-fpm's pm.status_listen needs
// a hidden extra pool for that). The socket is non-blocking and sits in the master loop's
// watch_fds; serve() accepts what is queued and answers each connection with a bounded budget
// (at most kPerConnection each, kBudget for the whole call, small buffers), then closes it: a
// slow or hostile client can delay a turn of the master loop by that much, never hold it, and a
// flood of them delays respawns and timeouts by at most kBudget.
#include "fcgi_host/net/listen_socket.hpp"
#include "fcgi_host/observe/client_error_log.hpp"
#include "fcgi_host/observe/metrics.hpp"
#include "fcgi_host/observe/status_page.hpp"

#include <chrono>
#include <functional>
#include <memory>
#include <string_view>

namespace fcgi_host {

// One request to the status socket, as the answers below see it.
struct StatusRequest {
  std::string_view method, path, query, accept;
  bool allowed = false; // --status-allow let it in (TCP), or it came over the Unix socket
  bool owner = false;   // a Unix peer running as the master's user, or root (SO_PEERCRED)
};

class StatusServer {
public:
  // POST /control/VERB?ARGS from the owner: `control` answers it (fcgi-host reload, scale).
  using Control = std::function<EndpointReply(std::string_view verb, std::string_view args)>;
  // Answers every other path instead of the scoreboard's page (the master of several pools).
  using Answer = std::function<EndpointReply(const StatusRequest&)>;

  static constexpr std::chrono::milliseconds kBudget{250};
  // A status request is one small write, there at once (and on TCP before the accept).
  static constexpr std::chrono::milliseconds kPerConnection{100};

  // Binds `socket` (--status-listen, with the mode and owner rules of --listen). Throws
  // StartupError.
  StatusServer(const ListenOptions& socket, ObservabilitySettings settings, int pool_listen_fd);
  // On a socket already bound (handed over by a binary upgrade).
  StatusServer(std::unique_ptr<ListenSocket> socket, ObservabilitySettings settings,
               int pool_listen_fd);

  int fd() const { return socket_->fd(); }
  const std::string& description() const { return socket_->description(); }
  void set_scoreboard(const process_manager::Scoreboard* s) { scoreboard_ = s; }
  void set_control(Control c) { control_ = std::move(c); }
  void set_answer(Answer a) { answer_ = std::move(a); }
  // The pool's socket is closed in the master (a stop began): no listen queue to report.
  void forget_pool_socket() { pool_listen_fd_ = -1; }
  // Its socket file, and the socket given up to a new master at a binary upgrade: the new
  // master serves on it and removes its path.
  const SocketFile& file() const { return socket_->file(); }
  void forget_path() { socket_->forget_path(); }

  // The socket is readable: answer the queued connections.
  void serve();

private:
  void serve_connection(int fd, bool tcp_peer_allowed, bool owner, std::uint64_t deadline_ns);
  EndpointReply answer(const StatusRequest& q) const;

  std::unique_ptr<ListenSocket> socket_;
  ObservabilitySettings settings_;
  int pool_listen_fd_;
  const process_manager::Scoreboard* scoreboard_ = nullptr;
  Control control_;
  Answer answer_;
  ClientErrorLog client_errors_; // slow or silent clients: rate-limited lines
};

} // namespace fcgi_host
