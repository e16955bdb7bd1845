#include "app/response.hpp"

#include "app/content_types.hpp"
#include "app/text.hpp"
#include "app/url_encoding.hpp"

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <memory>
#include <stdexcept>

namespace app {

void Response::set_header(std::string_view name, std::string_view value) {
  for (auto& [n, v] : headers)
    if (iequals(n, name)) {
      v.assign(value);
      return;
    }
  add_header(name, value);
}

void Response::add_header(std::string_view name, std::string_view value) {
  headers.emplace_back(name, value); // each string made in its place, not moved there
}

std::string_view Response::header(std::string_view name) const {
  for (const auto& [n, v] : headers)
    if (iequals(n, name)) return v;
  return {};
}

void Response::set_content(std::string_view content, std::string_view content_type) {
  body.assign(content);
  set_header("Content-Type", content_type);
}

void Response::set_cookie(const Cookie& cookie) {
  add_header("Set-Cookie", cookie.to_header());
}

void Response::clear_cookie(std::string_view name, std::string_view path) {
  Cookie c;
  c.name = name;
  c.path = path;
  c.max_age = 0;
  set_cookie(c);
}

void Response::redirect(std::string_view location, int code) {
  if (code != 301 && code != 302 && code != 303 && code != 307 && code != 308)
    throw std::invalid_argument("redirect: status must be 301, 302, 303, 307 or 308");
  if (location.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos)
    throw std::invalid_argument("redirect: the location holds CR, LF or NUL");
  status = code;
  set_header("Location", location);
  set_content(std::string(reason_phrase(code)) + ": " + std::string(location) + "\n", "text/plain");
}

bool Response::write(std::string_view chunk) {
  if (finished_) {
    used_after_finish_ = true;
    return false;
  }
  if (!sink_) { // a direct unit test: keep the streamed bytes in `body`
    head_sent_ = true;
    if (!head_only_) body.append(chunk);
    return true;
  }
  if (!head_sent_) {
    sink_->send_head(*this);
    head_sent_ = true;
    if (status != 200 && status_without_content(status)) head_only_ = true;
  }
  return chunk.empty() || head_only_ || sink_->send_body(chunk);
}

bool Response::flush() {
  if (finished_) {
    used_after_finish_ = true;
    return false;
  }
  if (!head_sent_) write({});
  return !sink_ || sink_->flush();
}

EventStream Response::event_stream() {
  set_header("Content-Type", "text/event-stream");
  set_header("Cache-Control", "no-cache");
  set_header("X-Accel-Buffering", "no");
  flush();
  return EventStream(*this);
}

bool EventStream::send(std::string_view data, std::string_view event, std::string_view id) {
  std::string text;
  if (!event.empty()) text.append("event: ").append(event).append("\n");
  if (!id.empty()) text.append("id: ").append(id).append("\n");
  for (std::size_t at = 0;;) {
    std::size_t end = data.find('\n', at);
    text.append("data: ").append(data.substr(at, end - at)).append("\n");
    if (end == std::string_view::npos) break;
    at = end + 1;
  }
  text.append("\n");
  return response_.write(text) && response_.flush();
}

bool EventStream::heartbeat(std::string_view text) {
  return response_.write(": " + std::string(text) + "\n\n") && response_.flush();
}

void Response::clear() {
  status = 200;
  headers.clear();
  body.clear();
}

void Response::reset(BodySink* sink) {
  clear();
  sink_ = sink;
  head_sent_ = false;
  head_only_ = false;
  finished_ = false;
  used_after_finish_ = false;
}

void Response::finish() {
  if (finished_) {
    used_after_finish_ = true;
    return;
  }
  finished_ = true;
  if (end_) end_->end_response(*this);
}

// ---- send_file(): the file itself, or the header that makes the front server send it ----

namespace {

// Files up to this size go out as one buffered body; larger ones are streamed.
constexpr std::size_t kChunk = 64 * 1024;
// A streamed file is read in pieces this large: the stream reads a piece larger than its own
// buffer straight into ours (one system call), and the host sends each piece as records around
// these bytes, with no further copy.
constexpr std::size_t kStreamPiece = 256 * 1024;

// An absolute path without "." or ".." segments or bytes that could end a header: the path the
// front server resolves (after the prefix, for nginx) is then the one the handler checked.
void check_path(std::string_view path) {
  if (!path.starts_with('/')) throw std::invalid_argument("send_file: the path must be absolute");
  if (path.find_first_of(std::string_view("\r\n\0", 3)) != std::string_view::npos)
    throw std::invalid_argument("send_file: the path holds CR, LF or NUL");
  for (std::string_view rest = path.substr(1); !rest.empty();) {
    const std::size_t slash = rest.find('/');
    const std::string_view segment = rest.substr(0, slash);
    if (segment == "." || segment == "..")
      throw std::invalid_argument("send_file: the path holds a \".\" or \"..\" segment");
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
  }
}

// Each segment percent-encoded, the slashes kept: nginx decodes the X-Accel-Redirect URI.
std::string encode_path(std::string_view path) {
  std::string out;
  for (std::string_view rest = path; !rest.empty();) {
    const std::size_t slash = rest.find('/');
    out += percent_encode(rest.substr(0, slash));
    if (slash == std::string_view::npos) break;
    out += '/';
    rest.remove_prefix(slash + 1);
  }
  return out;
}

} // namespace

bool Response::send_file(std::string_view path) {
  check_path(path);
  const std::filesystem::path file{std::string(path)};
  std::error_code ec;
  const bool regular = std::filesystem::is_regular_file(file, ec);
  const std::uintmax_t size = regular ? std::filesystem::file_size(file, ec) : 0;
  std::ifstream in;
  if (regular && !ec) in.open(file, std::ios::binary);
  if (!regular || ec || !in) {
    status = 404;
    set_content("Not Found\n", "text/plain");
    return true;
  }
  status = 200;
  body.clear();
  set_header("Content-Type", content_type_for(path));
  const FileOffload::Mode mode = offload_ ? offload_->mode : FileOffload::Mode::Stream;
  if (mode == FileOffload::Mode::XAccelRedirect) {
    std::string prefix = offload_->prefix;
    if (prefix.ends_with('/')) prefix.pop_back();
    set_header("X-Accel-Redirect", prefix + encode_path(path));
    return true;
  }
  if (mode == FileOffload::Mode::XSendfile) {
    set_header("X-Sendfile", path);
    return true;
  }
  if (size <= kChunk) {
    body.resize(static_cast<std::size_t>(size));
    in.read(body.data(), static_cast<std::streamsize>(size));
    body.resize(static_cast<std::size_t>(in.gcount()));
    return true;
  }
  set_header("Content-Length", std::to_string(size));
  if (head_only()) return write({});
  const auto piece = static_cast<std::size_t>(std::min<std::uintmax_t>(kStreamPiece, size));
  std::unique_ptr<char[]> chunk = std::make_unique_for_overwrite<char[]>(piece);
  std::uintmax_t sent = 0;
  while (sent < size) {
    in.read(chunk.get(),
            static_cast<std::streamsize>(std::min<std::uintmax_t>(piece, size - sent)));
    const auto got = static_cast<std::size_t>(in.gcount());
    if (got == 0) break;
    if (!write(std::string_view(chunk.get(), got))) return false;
    sent += got;
  }
  // Shorter than it was a moment ago: the response must be seen cut, not complete.
  if (sent < size)
    throw std::runtime_error("send_file: " + std::string(path) + " shrank while sent");
  return true;
}

std::string_view reason_phrase(int status) {
  switch (status) {
  case 100:
    return "Continue";
  case 101:
    return "Switching Protocols";
  case 102:
    return "Processing";
  case 103:
    return "Early Hints";
  case 200:
    return "OK";
  case 201:
    return "Created";
  case 202:
    return "Accepted";
  case 203:
    return "Non-Authoritative Information";
  case 204:
    return "No Content";
  case 205:
    return "Reset Content";
  case 206:
    return "Partial Content";
  case 207:
    return "Multi-Status";
  case 208:
    return "Already Reported";
  case 226:
    return "IM Used";
  case 300:
    return "Multiple Choices";
  case 301:
    return "Moved Permanently";
  case 302:
    return "Found";
  case 303:
    return "See Other";
  case 304:
    return "Not Modified";
  case 305:
    return "Use Proxy";
  case 307:
    return "Temporary Redirect";
  case 308:
    return "Permanent Redirect";
  case 400:
    return "Bad Request";
  case 401:
    return "Unauthorized";
  case 402:
    return "Payment Required";
  case 403:
    return "Forbidden";
  case 404:
    return "Not Found";
  case 405:
    return "Method Not Allowed";
  case 406:
    return "Not Acceptable";
  case 407:
    return "Proxy Authentication Required";
  case 408:
    return "Request Timeout";
  case 409:
    return "Conflict";
  case 410:
    return "Gone";
  case 411:
    return "Length Required";
  case 412:
    return "Precondition Failed";
  case 413:
    return "Content Too Large";
  case 414:
    return "URI Too Long";
  case 415:
    return "Unsupported Media Type";
  case 416:
    return "Range Not Satisfiable";
  case 417:
    return "Expectation Failed";
  case 418:
    return "I'm a teapot";
  case 421:
    return "Misdirected Request";
  case 422:
    return "Unprocessable Content";
  case 423:
    return "Locked";
  case 424:
    return "Failed Dependency";
  case 425:
    return "Too Early";
  case 426:
    return "Upgrade Required";
  case 428:
    return "Precondition Required";
  case 429:
    return "Too Many Requests";
  case 431:
    return "Request Header Fields Too Large";
  case 451:
    return "Unavailable For Legal Reasons";
  case 500:
    return "Internal Server Error";
  case 501:
    return "Not Implemented";
  case 502:
    return "Bad Gateway";
  case 503:
    return "Service Unavailable";
  case 504:
    return "Gateway Timeout";
  case 505:
    return "HTTP Version Not Supported";
  case 506:
    return "Variant Also Negotiates";
  case 507:
    return "Insufficient Storage";
  case 508:
    return "Loop Detected";
  case 510:
    return "Not Extended";
  case 511:
    return "Network Authentication Required";
  default:
    break;
  }
  switch (status / 100) {
  case 1:
    return "Informational";
  case 2:
    return "Success";
  case 3:
    return "Redirection";
  case 4:
    return "Client Error";
  case 5:
    return "Server Error";
  default:
    return "Nonstandard Status";
  }
}

} // namespace app
