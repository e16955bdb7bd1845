#include "fcgi_host/cli/client_commands.hpp"

#include "fcgi_host/cli/help_text.hpp"
#include "fcgi_host/observe/status_page.hpp"

#include "fcgi_host/net/connect.hpp"
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
#include <vector>

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
  bool help = false;
};

struct Failure {
  int code;
  std::string why;
};

// The status socket named by --connect (a listen address: unix:PATH, HOST:PORT, :PORT).
int connect_to(const std::string& text, Clock::time_point deadline) {
  ListenAddress a;
  std::string why;
  if (!parse_listen_address(text, a, why)) throw Failure{kClientUsage, "--connect: " + why};
  ConnectTarget target{a.kind == ListenAddress::Kind::Unix, a.path, std::to_string(a.port)};
  if (!target.is_unix) target.path_or_host = a.host.empty() ? "localhost" : a.host;
  int fd = connect_before(target, deadline, why);
  if (fd < 0) throw Failure{kClientNoAnswer, why};
  return fd;
}

std::string encode_request(const HostQuery& q) {
  std::string params;
  auto pair = [&params](std::string_view name, std::string_view value) {
    records::append_name_value(params, name, value);
  };
  std::string uri = q.path + (q.query.empty() ? "" : "?" + q.query);
  pair("GATEWAY_INTERFACE", "CGI/1.1");
  pair("SERVER_PROTOCOL", "HTTP/1.1");
  pair("REQUEST_METHOD", q.method);
  pair("REQUEST_URI", uri);
  pair("SCRIPT_NAME", q.path);
  pair("DOCUMENT_URI", q.path);
  pair("QUERY_STRING", q.query);
  pair("CONTENT_LENGTH", "");
  if (!q.accept.empty()) pair("HTTP_ACCEPT", q.accept);
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
    if (poll(&p, 1, poll_timeout_ms(deadline)) <= 0)
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
    int left = poll_timeout_ms(deadline);
    if (left == 0 || poll(&p, 1, left) <= 0) throw Failure{kClientNoAnswer, "no answer in time"};
    char buf[16384];
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) throw Failure{kClientNoAnswer, "connection closed before the end of the answer"};
    if (n < 0 && errno != EAGAIN && errno != EINTR)
      throw Failure{kClientNoAnswer, sys_error("read", peer)};
    if (n > 0) in.append(std::string_view(buf, static_cast<std::size_t>(n)));
  }
}

HostReply parse_reply(const std::string& cgi) {
  HostReply r;
  cgi::Head head = cgi::parse_head(cgi);
  if (head.status != 0) r.status = head.status;
  for (auto [name, value] : head.headers) {
    if (cgi::same_header_name(name, "Content-Type"))
      r.content_type = value;
    else if (cgi::same_header_name(name, "X-Idle-Workers"))
      r.idle = value;
    else if (cgi::same_header_name(name, "X-Listen-Queue"))
      r.queue = value;
    else if (cgi::same_header_name(name, kHostHeader))
      r.from_host = true;
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
    } else if (a == "--help" || a == "-h") {
      o.help = true;
    } else if ((a == "--json" || a == "--openmetrics" || a == "--prometheus" || a == "--html") &&
               !o.ping) {
      o.query = std::string(a.substr(2)) + (o.query == "full" ? "&full" : "");
    } else if (a == "--full" && !o.ping) {
      o.query = o.query.empty() ? "full" : o.query + "&full";
    } else {
      throw Failure{kClientUsage, "unknown option '" + std::string(a) + "'"};
    }
  }
  if (o.connect.empty() && !o.help) throw Failure{kClientUsage, "--connect ADDR is required"};
  return o;
}

// `page`: "status" or "ping" for those commands (a 404 then says which option sets the path).
HostReply ask(const std::string& address, const HostQuery& query, std::chrono::milliseconds timeout,
              std::string_view page = {}) {
  auto deadline = Clock::now() + timeout;
  int fd = connect_to(address, deadline);
  std::string out;
  try {
    out = exchange(fd, address, encode_request(query), deadline);
  } catch (...) {
    close(fd);
    throw;
  }
  close(fd);
  HostReply r = parse_reply(out);
  // The application answered (status and ping pages are off until their path is set), or
  // another FastCGI server did.
  if (!r.from_host && !page.empty())
    throw Failure{kClientNoAnswer, address + ": no " + std::string(page) + " page at " +
                                       query.path + " (set --" + std::string(page) +
                                       "-path on the host, or --path here): the answer (" +
                                       std::to_string(r.status) + ") has no " +
                                       std::string(kHostHeader) + " header"};
  if (!r.from_host)
    throw Failure{kClientNoAnswer, address + " answered, but not as fcgi-host (no " +
                                       std::string(kHostHeader) +
                                       " header): is it the "
                                       "host's --status-listen or --listen address?"};
  return r;
}

// fcgi-host reload [POOL] --connect ADDR, fcgi-host scale [POOL] N --connect ADDR.
int run_control_command(int argc, char** argv) {
  const std::string verb = argv[1];
  std::string connect, pool, workers;
  double timeout_s = 5;
  std::vector<std::string> words;
  for (int i = 2; i < argc; ++i) {
    std::string_view a = argv[i];
    if (a == "--help" || a == "-h") {
      std::cout << (verb == "scale" ? "Usage: fcgi-host scale [POOL] N --connect ADDR"
                                    : "Usage: fcgi-host reload [POOL] --connect ADDR")
                << " [--timeout SECONDS]\n\n"
                << kClientCommandsHelp;
      return kClientHealthy;
    }
    if ((a == "--connect" || a == "--timeout") && i + 1 < argc) {
      std::string v = argv[++i];
      if (a == "--connect") {
        connect = v;
        continue;
      }
      char* end = nullptr;
      timeout_s = std::strtod(v.c_str(), &end);
      if (*end || !(timeout_s > 0)) throw Failure{kClientUsage, "--timeout: seconds > 0"};
    } else if (a.starts_with("-")) {
      throw Failure{kClientUsage, "unknown option '" + std::string(a) + "'"};
    } else {
      words.emplace_back(a);
    }
  }
  if (verb == "scale" && !words.empty()) workers = words.back(), words.pop_back();
  if (words.size() > 1 ||
      (verb == "scale" &&
       (workers.empty() || workers.find_first_not_of("0123456789") != std::string::npos)))
    throw Failure{kClientUsage, verb == "scale" ? "usage: fcgi-host scale [POOL] N --connect ADDR"
                                                : "usage: fcgi-host reload [POOL] --connect ADDR"};
  if (connect.empty()) throw Failure{kClientUsage, "--connect ADDR is required"};
  if (!words.empty()) pool = words.front();
  // Appended piece by piece: `"literal" + string` draws a false -Wrestrict of GCC 12 at -O2.
  std::string args;
  if (!pool.empty()) args.append("pool=").append(pool);
  if (!workers.empty()) args.append(args.empty() ? "" : "&").append("workers=").append(workers);
  HostReply r = ask(connect, {"POST", "/control/" + verb, args, ""},
                    std::chrono::milliseconds(static_cast<long>(timeout_s * 1000)));
  std::cout << r.body << std::flush;
  if (r.status != 200) throw Failure{kClientUnhealthy, "answered " + std::to_string(r.status)};
  return kClientHealthy;
}

} // namespace

HostReply ask_host(const std::string& address, const HostQuery& query,
                   std::chrono::milliseconds timeout) {
  try {
    return ask(address, query, timeout);
  } catch (const Failure& f) {
    throw std::runtime_error(f.why);
  }
}

bool is_client_command(int argc, char** argv) {
  if (argc < 2) return false;
  std::string_view word = argv[1];
  return word == "status" || word == "ping" || word == "reload" || word == "scale";
}

int run_client_command(int argc, char** argv) {
  std::string what = argv[1];
  try {
    if (what == "reload" || what == "scale") return run_control_command(argc, argv);
    Options o = parse_options(argc, argv);
    if (o.help) {
      std::cout << (o.ping ? "Usage: fcgi-host ping --connect ADDR [--path PATH] [--timeout "
                             "SECONDS]\n"
                           : "Usage: fcgi-host status --connect ADDR [--path PATH] "
                             "[--json|--openmetrics|--prometheus|--html] [--full]\n"
                             "                        [--max-queue N] [--timeout SECONDS]\n")
                << "Asks a running fcgi-host over FastCGI (a health check) and prints the page.\n\n"
                << kClientCommandsHelp;
      return kClientHealthy;
    }
    HostReply r = ask(o.connect, {"GET", o.path, o.query, ""},
                      std::chrono::milliseconds(static_cast<long>(o.timeout_s * 1000)),
                      o.ping ? "ping" : "status");
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
