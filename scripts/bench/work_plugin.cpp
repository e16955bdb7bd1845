// The fcgi-host contender of scripts/bench-workloads.sh: the same four kinds of work as
// work_libfcgi.c, work.php and work.psgi, loaded with `fcgi-host --app libbench_work.so`.
//   /cpu?n=N       N turns of the benchmark's integer loop (the same loop in every language)
//   /io?ms=M       sleeps M ms, as a handler waiting on a database would
//   /upload        reads the request body, answers its size
//   /upload-stream the same, reading the body as it arrives (Request::body_reader())
//   /download?mb=M streams M MiB in 64 KiB chunks
//   /file?path=P   Response::send_file(P) (streamed, or X-Accel-Redirect by --send-file-mode)
#include "app/handler.hpp"
#include "app/plugin.hpp"

#include <charconv>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>

namespace {

long number(std::string_view text, long fallback, long max) {
  long v = fallback;
  std::from_chars(text.data(), text.data() + text.size(), v);
  return v < 0 ? 0 : v > max ? max : v;
}

// x = (x * 1103515245 + 12345) mod 2^31: stays below 2^62, so PHP and Perl compute it in
// integers too, and the work per turn is the same everywhere.
std::uint64_t spin(long n) {
  std::uint64_t x = 1;
  for (long i = 0; i < n; ++i)
    x = (x * 1103515245u + 12345u) & 0x7fffffffu;
  return x;
}

class WorkApp : public app::Handler {
public:
  void handle(const app::Request& request, app::Response& response) override {
    response.set_header("Content-Type", "text/plain");
    std::string_view path = request.path();
    if (path == "/cpu") {
      response.body = std::to_string(spin(number(request.query_arg("n"), 0, 100'000'000))) + "\n";
    } else if (path == "/io") {
      std::this_thread::sleep_for(
          std::chrono::milliseconds(number(request.query_arg("ms"), 5, 10'000)));
      response.body = "slept\n";
    } else if (path == "/upload") {
      response.body = std::to_string(request.body().size()) + "\n";
    } else if (path == "/upload-stream") {
      static char piece[64 * 1024];
      std::size_t total = 0;
      for (std::size_t n; (n = request.body_reader().read(piece, sizeof piece)) > 0;)
        total += n;
      response.body = std::to_string(total) + "\n";
    } else if (path == "/file") {
      response.send_file(request.query_arg("path"));
    } else if (path == "/download") {
      long mib = number(request.query_arg("mb"), 10, 1024);
      response.set_header("Content-Length", std::to_string(mib << 20));
      std::string chunk(64 * 1024, 'd');
      for (long i = 0; i < mib * 16; ++i)
        if (!response.write(chunk)) return; // the client left
    } else {
      response.body = "OK";
    }
  }
  bool streams_body(const app::Request& request) const override {
    return request.path() == "/upload-stream";
  }
};

} // namespace

FCGI_HOST_PLUGIN(WorkApp)
