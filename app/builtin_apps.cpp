#include "app/builtin_apps.hpp"

#include "app/router.hpp"

#include <charconv>
#include <chrono>
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

class EchoApp : public Router {
public:
  EchoApp() {
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
