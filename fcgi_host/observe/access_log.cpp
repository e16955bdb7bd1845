#include "fcgi_host/observe/access_log.hpp"

#include <cerrno>
#include <charconv>
#include <ctime>
#include <fcntl.h>
#include <stdexcept>
#include <system_error>
#include <unistd.h>

namespace fcgi_host {

namespace {

constexpr std::string_view kTokens = "amusdcbpwgtqI%";
// %{NAME}e: a FastCGI parameter; %{Name}o: a response header (php-fpm's and Apache's syntax).
constexpr std::string_view kNamedTokens = "eo";
constexpr std::string_view kKnown = "%a %m %u %s %d %c %b %p %w %g %t %q %I %{NAME}e %{Name}o %%";

// The name and the letter of a "%{NAME}x" at format[i] (the '%'); the letter 0 when malformed.
struct Named {
  std::string_view name;
  char kind = 0;
  std::size_t length = 0; // of the whole token
};
Named named_token(std::string_view format, std::size_t i) {
  Named n;
  std::size_t close = format.find('}', i + 2);
  if (close == std::string_view::npos || close + 1 >= format.size() || close == i + 2) return n;
  n.name = format.substr(i + 2, close - i - 2);
  n.kind = kNamedTokens.find(format[close + 1]) != std::string_view::npos ? format[close + 1] : 0;
  n.length = close + 2 - i;
  return n;
}

void append_number(std::string& out, std::uint64_t v) {
  char buf[24];
  auto r = std::to_chars(buf, buf + sizeof buf, v);
  out.append(buf, r.ptr);
}

// Milliseconds with three decimals: "12.345".
void append_ms(std::string& out, std::uint64_t ns) {
  append_number(out, ns / 1'000'000);
  out += '.';
  std::uint64_t frac = ns / 1000 % 1000;
  out += static_cast<char>('0' + frac / 100);
  out += static_cast<char>('0' + frac / 10 % 10);
  out += static_cast<char>('0' + frac % 10);
}

void append_field(std::string& out, std::string_view v) {
  if (v.empty()) {
    out += '-';
    return;
  }
  // A line is a line: control characters in a URI must not forge one.
  for (char c : v)
    out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
}

int open_file(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
  if (fd == -1)
    throw std::system_error(errno, std::generic_category(), "open(\"" + path + "\") failed");
  return fd;
}

} // namespace

bool valid_access_format(std::string_view format, std::string& why) {
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] != '%') continue;
    if (i + 1 < format.size() && format[i + 1] == '{') {
      Named n = named_token(format, i);
      if (n.kind == 0) {
        why = "malformed token '" + std::string(format.substr(i, 12)) +
              "' (a name in braces, then e or o: %{HTTP_HOST}e, %{Content-Type}o)";
        return false;
      }
      i += n.length - 1;
      continue;
    }
    if (i + 1 == format.size() || kTokens.find(format[i + 1]) == std::string_view::npos) {
      why = "unknown token '%" + std::string(format.substr(i + 1, 1)) +
            "' (known: " + std::string(kKnown) + ")";
      return false;
    }
    ++i;
  }
  return true;
}

AccessLog& AccessLog::get() {
  static AccessLog log;
  return log;
}

void AccessLog::open(const std::string& path, std::string_view format) {
  if (format.empty()) format = kDefaultAccessFormat;
  std::string why;
  if (!valid_access_format(format, why)) throw std::invalid_argument("access-format: " + why);
  tokens_.clear();
  for (std::size_t i = 0; i < format.size(); ++i) {
    if (format[i] == '%' && format[i + 1] == '{') {
      Named n = named_token(format, i);
      tokens_.push_back({n.kind, std::string(n.name)});
      i += n.length - 1;
      continue;
    }
    if (format[i] == '%' && format[i + 1] != '%') {
      tokens_.push_back({format[++i], {}});
      continue;
    }
    if (format[i] == '%') ++i; // "%%"
    if (tokens_.empty() || tokens_.back().kind != 0) tokens_.push_back({0, {}});
    tokens_.back().text += format[i];
  }
  int fd = path.empty() ? -1 : open_file(path);
  if (fd_ >= 0) ::close(fd_);
  fd_ = fd;
  path_ = path;
  line_.reserve(512);
}

void AccessLog::reopen() {
  if (fd_ < 0) return;
  int fd = open_file(path_); // throws: the caller logs it, and lines keep going to the old file
  ::dup3(fd, fd_, O_CLOEXEC);
  ::close(fd);
}

void AccessLog::append_time() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts); // vDSO, no system call
  if (ts.tv_sec != time_second_) {
    time_second_ = ts.tv_sec;
    tm local;
    localtime_r(&ts.tv_sec, &local);
    char buf[64];
    std::size_t n = strftime(buf, sizeof buf, "[%d/%b/%Y:%H:%M:%S %z]", &local);
    time_text_.assign(buf, n);
  }
  line_ += time_text_;
}

const std::string& AccessLog::format_line(const Entry& e) {
  line_.clear();
  for (const Token& t : tokens_) {
    switch (t.kind) {
    case 0:
      line_ += t.text;
      break;
    case 'a':
      append_field(line_, e.remote_addr);
      break;
    case 'm':
      append_field(line_, e.method);
      break;
    case 'u':
      append_field(line_, e.uri);
      break;
    case 's':
      append_number(line_, static_cast<std::uint64_t>(e.status));
      break;
    case 'd':
      append_ms(line_, e.duration_ns);
      break;
    case 'c':
      if (e.cpu_ns < 0)
        line_ += '-';
      else
        append_ms(line_, static_cast<std::uint64_t>(e.cpu_ns));
      break;
    case 'b':
      if (e.body_bytes < 0)
        line_ += '-';
      else
        append_number(line_, static_cast<std::uint64_t>(e.body_bytes));
      break;
    case 'p':
      append_number(line_, static_cast<std::uint64_t>(e.pid));
      break;
    case 'w':
      append_number(line_, e.slot);
      break;
    case 'g':
      append_number(line_, e.generation);
      break;
    case 't':
      append_time();
      break;
    case 'I':
      append_field(line_, e.request ? e.request->request_id() : std::string_view{});
      break;
    case 'e':
      append_field(line_, e.request ? e.request->param(t.text) : std::string_view{});
      break;
    case 'o':
      append_field(line_, e.response ? e.response->header(t.text) : std::string_view{});
      break;
    case 'q':
      if (e.queue_ns < 0)
        line_ += '-';
      else
        append_ms(line_, static_cast<std::uint64_t>(e.queue_ns));
      break;
    }
  }
  return line_;
}

void AccessLog::write(const Entry& e) {
  if (fd_ < 0) return;
  format_line(e);
  line_ += '\n';
  // One write(2): O_APPEND places the whole line at the end, never interleaved with another.
  const char* p = line_.data();
  std::size_t left = line_.size();
  while (left > 0) {
    ssize_t w = ::write(fd_, p, left);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return; // a full disk must not stop the worker
    p += w;
    left -= static_cast<std::size_t>(w);
  }
}

} // namespace fcgi_host
