#include "app/builtin_apps.hpp"

#include "app/router.hpp"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <thread>

namespace app {
namespace {

class HelloApp : public Handler {
public:
  void handle(const Request&, Response& response) override {
    response.set_header("Content-Type", "text/plain");
    response.body.assign("OK");
  }
};

constexpr long kMaxDelayMs = 60'000;

void echo(const Request& request, Response& response) {
  std::string_view delay = request.query_arg("delay_ms");
  long ms = 0;
  if (!delay.empty()) {
    std::from_chars(delay.data(), delay.data() + delay.size(), ms);
    if (ms > kMaxDelayMs) ms = kMaxDelayMs;
    if (ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(ms));
  }
  std::string& out = response.body;
  out.reserve(512 + request.body().size());
  out.append("method=").append(request.method()).append("\n");
  out.append("uri=").append(request.uri()).append("\n");
  out.append("path=").append(request.path()).append("\n");
  out.append("query=").append(request.query()).append("\n");
  for (std::size_t i = 0; i < request.param_count(); ++i) {
    auto p = request.param_at(i);
    out.append("param ").append(p.name).append("=").append(p.value).append("\n");
  }
  out.append("\n").append(request.body());
  response.set_header("Content-Type", "text/plain");
}

// A body read as it arrives (Router::post_stream): its size and FNV-1a hash, in pieces of
// ?piece=N bytes (default 64 KiB), stopping after ?read=N bytes when given.
void stream_digest(const Request& request, Response& response) {
  auto number = [&](std::string_view name, std::size_t fallback) {
    std::string_view text = request.query_arg(name);
    std::size_t v = fallback;
    std::from_chars(text.data(), text.data() + text.size(), v);
    return v;
  };
  const std::size_t piece = std::clamp<std::size_t>(number("piece", 64 * 1024), 1, 1 << 20);
  const std::size_t limit = number("read", static_cast<std::size_t>(-1));
  std::string buffer(piece, '\0');
  std::uint64_t hash = 14695981039346656037ull;
  std::size_t total = 0;
  BodyReader& reader = request.body_reader();
  while (total < limit) {
    const std::size_t n = reader.read(buffer.data(), std::min(piece, limit - total));
    if (n == 0) break;
    for (std::size_t i = 0; i < n; ++i)
      hash = (hash ^ static_cast<unsigned char>(buffer[i])) * 1099511628211ull;
    total += n;
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(hash));
  response.set_content("streamed=" + std::to_string(total) + " fnv=" + hex +
                           (request.body_streamed() ? " as it arrived\n" : " whole\n"),
                       "text/plain");
}

// The parts of a multipart body parsed as it arrives: name and size of each.
void stream_parts(const Request& request, Response& response) {
  std::string out;
  for (const MultipartPart& part : request.multipart())
    out += part.name + "=" + std::to_string(part.data.size()) + "\n";
  response.set_content(out, "text/plain");
}

class EchoApp : public Router {
public:
  EchoApp() {
    post_stream("/stream", stream_digest);
    post_stream("/stream-parts", stream_parts);
    get("/only-get", echo);
    any("/not-found", [](const Request&, Response& response) {
      response.status = 404;
      response.set_content("Not Found\n", "text/plain");
    });
    any("/throw", [](const Request&, Response&) {
      throw std::runtime_error("echo app: /throw asked for an exception");
    });
    any("/crash", [](const Request&, Response&) { std::abort(); });
    any("/*", echo);
  }
};

} // namespace

std::unique_ptr<Handler> make_hello_app() {
  return std::make_unique<HelloApp>();
}
std::unique_ptr<Handler> make_echo_app() {
  return std::make_unique<EchoApp>();
}

std::unique_ptr<Handler> make_builtin_app(std::string_view name) {
  if (name == "hello") return make_hello_app();
  if (name == "echo") return make_echo_app();
  return nullptr;
}

bool is_builtin_app(std::string_view name) {
  return name == "hello" || name == "echo";
}

} // namespace app
