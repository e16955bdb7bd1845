#include "fcgi_host/testing/fcgi_test_client.hpp"

#include "fcgi_host/net/connect.hpp"
#include "fcgi_host/protocol/cgi_head.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

namespace fcgi_test {

namespace records = fcgi_host::records;
namespace cgi = fcgi_host::cgi;
using Clock = std::chrono::steady_clock;

namespace {

std::string errno_text(int err) {
  return std::strerror(err);
}

// Split "unix:/p" | "/p" | "[v6]:port" | "host:port" | ":port".
struct ParsedAddress {
  bool is_unix = false;
  std::string path_or_host;
  std::string port;
};

ParsedAddress parse_address(std::string_view address) {
  if (address.starts_with("unix:")) return {true, std::string(address.substr(5)), {}};
  if (address.starts_with("/")) return {true, std::string(address), {}};
  if (address.starts_with("[")) {
    auto close = address.find("]:");
    if (close == std::string_view::npos)
      throw Error("bad address \"" + std::string(address) + "\"");
    return {false, std::string(address.substr(1, close - 1)),
            std::string(address.substr(close + 2))};
  }
  auto colon = address.rfind(':');
  if (colon == std::string_view::npos || colon + 1 == address.size())
    throw Error("bad address \"" + std::string(address) + "\" (want unix:/path, host:port)");
  std::string host(address.substr(0, colon));
  return {false, host.empty() ? "127.0.0.1" : host, std::string(address.substr(colon + 1))};
}

void set_send_timeout(int fd, Millis timeout) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

} // namespace

const char* to_string(RecordType type) {
  return records::type_name(type);
}

const char* to_string(IoStatus status) {
  switch (status) {
  case IoStatus::Ok:
    return "ok";
  case IoStatus::Closed:
    return "closed by peer";
  case IoStatus::TimedOut:
    return "timed out";
  }
  return "?";
}

// ---- Encoding ----------------------------------------------------------------------------------

std::string encode_record(std::uint8_t type, std::uint16_t request_id, std::string_view content,
                          std::uint8_t padding, std::uint8_t version) {
  if (content.size() > kMaxContent)
    throw Error("record content of " + std::to_string(content.size()) + " bytes exceeds 65535");
  std::string out;
  out.reserve(kHeaderSize + content.size() + padding);
  records::append_header(out, records::Header{version, type, request_id,
                                              static_cast<std::uint16_t>(content.size()), padding});
  out.append(content).append(padding, '\0');
  return out;
}

std::string encode_record(RecordType type, std::uint16_t request_id, std::string_view content,
                          std::uint8_t padding) {
  return encode_record(static_cast<std::uint8_t>(type), request_id, content, padding);
}

std::string encode_stream(RecordType type, std::uint16_t request_id, std::string_view data,
                          std::size_t chunk) {
  std::string out;
  records::append_stream(out, type, request_id, data, chunk);
  return out;
}

std::string encode_name_value(std::string_view name, std::string_view value) {
  std::string out;
  records::append_name_value(out, name, value);
  return out;
}

std::string encode_params(const Params& params) {
  std::string out;
  for (const auto& [name, value] : params)
    records::append_name_value(out, name, value);
  return out;
}

Params decode_params(std::string_view body) {
  Params out;
  for (records::NameValue pair;;) {
    std::size_t at = body.size();
    switch (records::next_name_value(body, pair)) {
    case records::PairStatus::Pair:
      out.emplace_back(pair.name, pair.value);
      break;
    case records::PairStatus::End:
      return out;
    case records::PairStatus::Truncated:
      throw Error("truncated name-value pair, " + std::to_string(at) + " bytes before the end");
    }
  }
}

std::string begin_request_body(Role role, std::uint8_t flags) {
  std::array<char, 8> body = records::make_begin_request_body(role, flags);
  return std::string(body.data(), body.size());
}

EndRequest decode_end_request(std::string_view body) {
  records::EndRequest e;
  if (!records::decode_end_request(body, e))
    throw Error("END_REQUEST body of " + std::to_string(body.size()) + " bytes, want 8");
  return {e.app_status, e.protocol_status};
}

// ---- Requests and responses --------------------------------------------------------------------

Params standard_params(std::string_view method, std::string_view uri, std::size_t content_length,
                       const Params& extra) {
  auto q = uri.find('?');
  std::string path(uri.substr(0, q));
  std::string query(q == std::string_view::npos ? std::string_view{} : uri.substr(q + 1));
  Params p = {
      {"QUERY_STRING", query},
      {"REQUEST_METHOD", std::string(method)},
      {"CONTENT_TYPE", content_length ? "application/octet-stream" : ""},
      {"CONTENT_LENGTH", content_length ? std::to_string(content_length) : ""},
      {"SCRIPT_NAME", path},
      {"REQUEST_URI", std::string(uri)},
      {"DOCUMENT_URI", path},
      {"DOCUMENT_ROOT", "/var/www"},
      {"SERVER_PROTOCOL", "HTTP/1.1"},
      {"REQUEST_SCHEME", "http"},
      {"GATEWAY_INTERFACE", "CGI/1.1"},
      {"SERVER_SOFTWARE", "fcgi_test/1.0"},
      {"REMOTE_ADDR", "127.0.0.1"},
      {"REMOTE_PORT", "40000"},
      {"SERVER_ADDR", "127.0.0.1"},
      {"SERVER_PORT", "80"},
      {"SERVER_NAME", "localhost"},
      {"REDIRECT_STATUS", "200"},
      {"HTTP_HOST", "localhost"},
  };
  for (const auto& param : extra) { // not a structured binding: clang 14 cannot capture one
    auto it =
        std::find_if(p.begin(), p.end(), [&](const auto& kv) { return kv.first == param.first; });
    if (it != p.end())
      it->second = param.second;
    else
      p.push_back(param);
  }
  return p;
}

std::optional<std::string> Response::header(std::string_view name) const {
  for (const auto& [n, v] : headers)
    if (cgi::same_header_name(n, name)) return v;
  return std::nullopt;
}

std::vector<std::string> Response::header_values(std::string_view name) const {
  std::vector<std::string> out;
  for (const auto& [n, v] : headers)
    if (cgi::same_header_name(n, name)) out.push_back(v);
  return out;
}

void parse_cgi_output(std::string_view out, Response& response) {
  cgi::Head head = cgi::parse_head(out);
  response.headers.assign(head.headers.begin(), head.headers.end());
  response.body = std::string(head.body);
  // CGI: no Status header means 200; no header block at all, 0.
  response.status = !head.found ? 0 : head.status != 0 ? head.status : 200;
}

// ---- Connections -------------------------------------------------------------------------------

int connect_socket(std::string_view address, Millis timeout) {
  ParsedAddress a = parse_address(address);
  std::string error;
  int fd =
      fcgi_host::connect_before({a.is_unix, a.path_or_host, a.port}, Clock::now() + timeout, error);
  if (fd < 0) throw Error(error);
  set_send_timeout(fd, timeout); // a peer that stops reading cannot hold a send for longer
  return fd;
}

Client Client::connect(std::string_view address, Millis timeout) {
  return Client(connect_socket(address, timeout));
}

Client::Client(int fd) : fd_(fd) {}

Client::Client(Client&& other) noexcept {
  *this = std::move(other);
}

Client& Client::operator=(Client&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::exchange(other.fd_, -1);
    keep_conn_ = other.keep_conn_;
    peer_closed_ = other.peer_closed_;
    timeout_ = other.timeout_;
    next_id_ = other.next_id_;
    in_ = std::move(other.in_);
    pending_ = std::move(other.pending_);
  }
  return *this;
}

Client::~Client() {
  close();
}

void Client::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

bool Client::fill(Clock::time_point deadline) {
  if (fd_ < 0) throw Error("read on a closed client");
  for (;;) {
    pollfd p{fd_, POLLIN, 0};
    int n = ::poll(&p, 1, fcgi_host::poll_timeout_ms(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error("poll: " + errno_text(errno));
    if (n == 0) return false;
    char buf[65536];
    ssize_t got = ::recv(fd_, buf, sizeof buf, MSG_DONTWAIT);
    if (got > 0) {
      in_.append(std::string_view(buf, static_cast<std::size_t>(got)));
      return true;
    }
    if (got == 0 || errno == ECONNRESET || errno == EPIPE) {
      peer_closed_ = true;
      return true;
    }
    if (errno != EINTR && errno != EAGAIN) throw Error("recv: " + errno_text(errno));
  }
}

void Client::write_all(std::string_view bytes, Clock::time_point deadline) {
  if (fd_ < 0) throw Error("write on a closed client");
  while (!bytes.empty()) {
    // Also read while writing: a peer that answers before it has read everything (an early 413, a
    // large echo) must not deadlock against us with both socket buffers full.
    pollfd p{fd_, static_cast<short>(POLLOUT | (peer_closed_ ? 0 : POLLIN)), 0};
    int n = ::poll(&p, 1, fcgi_host::poll_timeout_ms(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) throw Error("poll: " + errno_text(errno));
    if (n == 0)
      throw TimeoutError("send: peer did not read " + std::to_string(bytes.size()) +
                         " more bytes in time");
    if ((p.revents & POLLIN) && !peer_closed_) {
      fill(Clock::now());
      continue;
    }
    ssize_t sent = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent > 0) {
      bytes.remove_prefix(static_cast<std::size_t>(sent));
    } else if (errno == EPIPE || errno == ECONNRESET) {
      peer_closed_ = true;
      throw Error("send: connection closed by peer with " + std::to_string(bytes.size()) +
                  " bytes unsent");
    } else if (errno != EINTR && errno != EAGAIN) {
      throw Error("send: " + errno_text(errno));
    }
  }
}

std::optional<Record> Client::take_buffered_record() {
  records::RecordView view;
  if (!in_.next(view)) return std::nullopt;
  Record r;
  r.version = view.header.version;
  r.type = static_cast<RecordType>(view.header.type);
  r.request_id = view.header.request_id;
  r.content = view.content;
  return r;
}

void Client::send_raw(std::string_view bytes) {
  write_all(bytes, Clock::now() + timeout_);
}

RecordResult Client::read_record(Millis timeout) {
  auto deadline = Clock::now() + timeout;
  for (;;) {
    if (auto r = take_buffered_record()) return {IoStatus::Ok, std::move(*r)};
    if (peer_closed_) return {IoStatus::Closed, {}};
    if (!fill(deadline)) return {IoStatus::TimedOut, {}};
  }
}

ReadAllResult Client::read_until_closed(Millis timeout) {
  auto deadline = Clock::now() + timeout;
  while (!peer_closed_)
    if (!fill(deadline)) return {IoStatus::TimedOut, in_.take_rest()};
  return {IoStatus::Closed, in_.take_rest()};
}

std::uint16_t Client::send_request(const Request& req) {
  std::uint16_t id = req.id;
  while (id == 0 || (req.id == 0 && pending_.count(id)))
    id = next_id_++;
  bool keep = req.keep_conn.value_or(keep_conn_);
  Params params = req.params
                      ? *req.params
                      : standard_params(req.method, req.uri, req.body.size(), req.extra_params);
  std::string bytes;
  records::append_begin_request(bytes, id, req.role, keep ? kKeepConn : 0);
  records::append_stream(bytes, RecordType::Params, id, encode_params(params));
  records::append_stream(bytes, RecordType::Stdin, id, req.body);
  pending_[id] = Response{};
  try {
    write_all(bytes, Clock::now() + timeout_);
  } catch (const TimeoutError&) {
    throw;
  } catch (const Error&) {
    // The peer closed before taking the whole request (say, an early 413): what it answered is
    // still readable, so leave it to read_response() to report.
    if (!peer_closed_) throw;
  }
  return id;
}

void Client::finish(Response& r) const {
  parse_cgi_output(r.stdout_raw, r);
}

Response Client::read_response(std::uint16_t id) {
  for (;;) {
    auto it = pending_.find(id);
    if (it != pending_.end() && it->second.ended) {
      Response r = std::move(it->second);
      pending_.erase(it);
      finish(r);
      return r;
    }
    RecordResult rr = read_record(timeout_);
    if (rr.status == IoStatus::TimedOut)
      throw TimeoutError("no END_REQUEST for request " + std::to_string(id) + " within " +
                         std::to_string(timeout_.count()) + " ms");
    if (rr.status == IoStatus::Closed) {
      Response r = std::move(pending_[id]);
      pending_.erase(id);
      finish(r);
      return r;
    }
    Record& rec = rr.record;
    if (rec.request_id == 0) continue; // management records (e.g. UNKNOWN_TYPE) are not ours here
    Response& p = pending_[rec.request_id];
    switch (rec.type) {
    case RecordType::Stdout:
      p.stdout_raw += rec.content;
      break;
    case RecordType::Stderr:
      p.stderr_text += rec.content;
      break;
    case RecordType::EndRequest: {
      EndRequest e = decode_end_request(rec.content);
      p.app_status = e.app_status;
      p.protocol_status = e.protocol_status;
      p.ended = true;
      break;
    }
    default:
      throw Error(std::string("unexpected ") + to_string(rec.type) + " record (type " +
                  std::to_string(static_cast<int>(rec.type)) + ") for request " +
                  std::to_string(rec.request_id));
    }
  }
}

Response Client::request(const Request& req) {
  return read_response(send_request(req));
}

Response Client::request(std::string_view method, std::string_view uri, std::string_view body,
                         const Params& extra_params) {
  Request req;
  req.method = method;
  req.uri = uri;
  req.body = body;
  req.extra_params = extra_params;
  return request(req);
}

std::map<std::string, std::string> Client::get_values(const std::vector<std::string>& names) {
  std::string bytes;
  records::append_get_values(bytes, std::vector<std::string_view>(names.begin(), names.end()));
  send_raw(bytes);
  auto deadline = Clock::now() + timeout_;
  for (;;) {
    RecordResult rr = read_record(std::chrono::duration_cast<Millis>(deadline - Clock::now()));
    if (rr.status != IoStatus::Ok)
      throw Error(std::string("GET_VALUES: no GET_VALUES_RESULT: ") + to_string(rr.status));
    if (rr.record.type == RecordType::GetValuesResult && rr.record.request_id == 0) {
      std::map<std::string, std::string> out;
      for (auto& [n, v] : decode_params(rr.record.content))
        out[n] = v;
      return out;
    }
  }
}

void Client::abort_request(std::uint16_t request_id) {
  std::string bytes;
  records::append_abort_request(bytes, request_id);
  send_raw(bytes);
}

} // namespace fcgi_test
