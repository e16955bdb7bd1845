// A small blocking HTTP/1.1 client for the requests that go through nginx.
#include "harness.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <netinet/in.h>
#include <sstream>
#include <sys/socket.h>
#include <unistd.h>

namespace it {

using fcgi_test::Error;

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
