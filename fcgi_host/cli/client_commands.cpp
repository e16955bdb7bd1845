#include "fcgi_host/cli/client_commands.hpp"

#include "fcgi_host/net/listen_address.hpp"
#include "fcgi_host/protocol/cgi_head.hpp"
#include "fcgi_host/protocol/records.hpp"
#include "fcgi_host/sys_error.hpp"

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <iostream>
#include <netdb.h>
#include <poll.h>
#include <string>
#include <string_view>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace fcgi_host {

namespace {

using Clock = std::chrono::steady_clock;

struct Options {
  bool ping = false;
  std::string connect;
  std::string path;
  std::string query;
  long max_queue = -1;
  double timeout_s = 5;
};

struct Failure {
  int code;
  std::string why;
};

int remaining_ms(Clock::time_point deadline) {
  auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

// A non-blocking connect bounded by the deadline.
int connect_to(const std::string& text, Clock::time_point deadline) {
  ListenAddress a;
  std::string why;
  if (!parse_listen_address(text, a, why)) throw Failure{kClientUsage, "--connect: " + why};
  auto try_connect = [&](int family, const sockaddr* addr, socklen_t len) -> int {
    int fd = socket(family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    if (connect(fd, addr, len) == 0) return fd;
    if (errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      int err = 0;
      socklen_t el = sizeof err;
      if (poll(&p, 1, remaining_ms(deadline)) == 1 &&
          getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &el) == 0 && err == 0)
        return fd;
      errno = err ? err : ETIMEDOUT;
    }
    int saved = errno;
    close(fd);
    errno = saved;
    return -1;
  };
  int fd = -1;
  if (a.kind == ListenAddress::Kind::Unix) {
    sockaddr_un sun{};
    sun.sun_family = AF_UNIX;
    if (a.path.size() >= sizeof sun.sun_path)
      throw Failure{kClientUsage, "--connect: path too long"};
    std::memcpy(sun.sun_path, a.path.c_str(), a.path.size() + 1);
    fd = try_connect(AF_UNIX, reinterpret_cast<sockaddr*>(&sun), sizeof sun);
  } else {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    std::string host = a.host.empty() ? "localhost" : a.host;
    int rc = getaddrinfo(host.c_str(), std::to_string(a.port).c_str(), &hints, &res);
    if (rc != 0) throw Failure{kClientNoAnswer, text + ": " + gai_strerror(rc)};
    for (addrinfo* ai = res; ai && fd < 0; ai = ai->ai_next)
      fd = try_connect(ai->ai_family, ai->ai_addr, ai->ai_addrlen);
    freeaddrinfo(res);
  }
  if (fd < 0) throw Failure{kClientNoAnswer, sys_error("connect", text)};
  return fd;
}

std::string encode_request(const Options& o) {
  std::string params;
  auto pair = [&params](std::string_view name, std::string_view value) {
    records::append_name_value(params, name, value);
  };
  std::string uri = o.path + (o.query.empty() ? "" : "?" + o.query);
  pair("GATEWAY_INTERFACE", "CGI/1.1");
  pair("SERVER_PROTOCOL", "HTTP/1.1");
  pair("REQUEST_METHOD", "GET");
  pair("REQUEST_URI", uri);
  pair("SCRIPT_NAME", o.path);
  pair("DOCUMENT_URI", o.path);
  pair("QUERY_STRING", o.query);
  pair("CONTENT_LENGTH", "");
  constexpr std::uint16_t id = 1;
  std::string out;
  records::append_begin_request(out, id, records::Role::Responder); // no keep-conn
  records::append_stream(out, records::Type::Params, id, params);
  records::append_stream(out, records::Type::Stdin, id, {});
  return out;
}

// Sends the request, returns the STDOUT stream.
std::string exchange(int fd, const std::string& peer, const std::string& request,
                     Clock::time_point deadline) {
  for (std::size_t sent = 0; sent < request.size();) {
    ssize_t n = ::send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR)
      throw Failure{kClientNoAnswer, sys_error("send", peer)};
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, remaining_ms(deadline)) <= 0)
      throw Failure{kClientNoAnswer, "timed out sending"};
  }
  records::RecordReader in;
  std::string out;
  for (;;) {
    for (records::RecordView r; in.next(r);) {
      if (r.header.is(records::Type::Stdout)) out.append(r.content);
      if (r.header.is(records::Type::EndRequest)) return out;
    }
    pollfd p{fd, POLLIN, 0};
    int left = remaining_ms(deadline);
    if (left == 0 || poll(&p, 1, left) <= 0) throw Failure{kClientNoAnswer, "no answer in time"};
    char buf[16384];
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) throw Failure{kClientNoAnswer, "connection closed before the end of the answer"};
    if (n < 0 && errno != EAGAIN && errno != EINTR)
      throw Failure{kClientNoAnswer, sys_error("read", peer)};
    if (n > 0) in.append(std::string_view(buf, static_cast<std::size_t>(n)));
  }
}

struct Reply {
  int status = 200;
  std::string idle, queue; // X-Idle-Workers, X-Listen-Queue
  std::string body;
};

Reply parse_reply(const std::string& cgi) {
  Reply r;
  cgi::Head head = cgi::parse_head(cgi);
  if (head.status != 0) r.status = head.status;
  for (auto [name, value] : head.headers) {
    if (cgi::same_header_name(name, "X-Idle-Workers"))
      r.idle = value;
    else if (cgi::same_header_name(name, "X-Listen-Queue"))
      r.queue = value;
  }
  r.body = head.body;
  return r;
}

Options parse_options(int argc, char** argv) {
  Options o;
  o.ping = std::string_view(argv[1]) == "ping";
  o.path = o.ping ? "/ping" : "/status";
  for (int i = 2; i < argc; ++i) {
    std::string_view a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw Failure{kClientUsage, std::string(a) + ": needs a value"};
      return argv[++i];
    };
    if (a == "--connect")
      o.connect = value();
    else if (a == "--path")
      o.path = value();
    else if (a == "--timeout") {
      std::string v = value();
      char* end = nullptr;
      o.timeout_s = std::strtod(v.c_str(), &end);
      if (*end || !(o.timeout_s > 0)) throw Failure{kClientUsage, "--timeout: seconds > 0"};
    } else if (a == "--max-queue" && !o.ping) {
      std::string v = value();
      auto r = std::from_chars(v.data(), v.data() + v.size(), o.max_queue);
      if (r.ec != std::errc() || r.ptr != v.data() + v.size() || o.max_queue < 0)
        throw Failure{kClientUsage, "--max-queue: a count >= 0"};
    } else if ((a == "--json" || a == "--openmetrics" || a == "--html") && !o.ping) {
      o.query = std::string(a.substr(2)) + (o.query == "full" ? "&full" : "");
    } else if (a == "--full" && !o.ping) {
      o.query = o.query.empty() ? "full" : o.query + "&full";
    } else {
      throw Failure{kClientUsage, "unknown option '" + std::string(a) + "'"};
    }
  }
  if (o.connect.empty()) throw Failure{kClientUsage, "--connect ADDR is required"};
  return o;
}

} // namespace

bool is_client_command(int argc, char** argv) {
  return argc >= 2 &&
         (std::string_view(argv[1]) == "status" || std::string_view(argv[1]) == "ping");
}

int run_client_command(int argc, char** argv) {
  std::string what = argv[1];
  try {
    Options o = parse_options(argc, argv);
    auto deadline = Clock::now() + std::chrono::milliseconds(static_cast<long>(o.timeout_s * 1000));
    int fd = connect_to(o.connect, deadline);
    std::string out;
    try {
      out = exchange(fd, o.connect, encode_request(o), deadline);
    } catch (...) {
      close(fd);
      throw;
    }
    close(fd);
    Reply r = parse_reply(out);
    std::cout << r.body << std::flush;
    if (r.status != 200) throw Failure{kClientUnhealthy, "answered " + std::to_string(r.status)};
    if (o.max_queue >= 0 && r.idle == "0") {
      long queue = 0;
      std::from_chars(r.queue.data(), r.queue.data() + r.queue.size(), queue);
      if (queue > o.max_queue)
        throw Failure{kClientUnhealthy, "no idle worker and " + std::to_string(queue) +
                                            " connections waiting (--max-queue " +
                                            std::to_string(o.max_queue) + ")"};
    }
    return kClientHealthy;
  } catch (const Failure& f) {
    std::cerr << "fcgi-host " << what << ": " << f.why << "\n";
    return f.code;
  }
}

} // namespace fcgi_host
