// --threads in-process: the real worker loop and its handler threads, hammered by concurrent
// clients, with a handler shared by every thread (thread-safe) and one instance per thread.
// Built also with ThreadSanitizer (build-tsan, scripts/test.sh): a race between the loop and a
// handler thread (the lane's request, its output, the connection) is reported there.
#include "app/router.hpp"
#include "fcgi_host/runners/in_process_host.hpp"
#include "fcgi_host/testing/fcgi_test_client.hpp"
#include "fcgi_host/worker/worker.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kClients = 8;
constexpr int kRequestsEach = 40;

// Shared by every thread: only atomics.
class SharedCounter : public app::Router {
public:
  SharedCounter() {
    get("/count", [this](const app::Request&, app::Response& res) {
      res.set_content(std::to_string(++calls_), "text/plain");
    });
    get("/stream", [](const app::Request&, app::Response& res) {
      app::EventStream events = res.event_stream();
      for (int i = 0; i < 3; ++i)
        events.send("tick " + std::to_string(i));
    });
  }
  std::atomic<int> calls_{0};
};

// One instance per thread: plain members, which a second thread would race on.
std::atomic<int> g_instances{0};
std::atomic<int> g_thread_starts{0};
class PerThread : public app::Router {
public:
  PerThread() {
    ++g_instances;
    get("/count", [this](const app::Request& req, app::Response& res) {
      ++calls_;
      scratch_.assign(req.uri());
      res.set_content(scratch_ + " " + std::to_string(calls_), "text/plain");
    });
  }
  void on_thread_start() override { ++g_thread_starts; }
  int calls_ = 0;
  std::string scratch_;
};

fcgi_host::WorkerSettings threaded(unsigned threads, bool thread_safe) {
  fcgi_host::WorkerSettings s;
  s.threads = threads;
  s.handler_thread_safe = thread_safe;
  return s;
}

// Every client sends its requests on a kept connection of its own; all must be 200.
int hammer(const std::string& address, const std::string& target) {
  std::atomic<int> ok{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c)
    clients.emplace_back([&] {
      auto client = fcgi_test::Client::connect(address);
      for (int i = 0; i < kRequestsEach; ++i)
        ok += client.request("GET", target).status == 200;
    });
  for (auto& t : clients)
    t.join();
  return ok;
}

} // namespace

TEST_CASE("threads: a thread-safe handler shared by 4 threads, hammered by 8 clients") {
  auto shared = std::make_shared<SharedCounter>();
  fcgi_host::InProcessHost host(threaded(4, true), [shared] {
    return fcgi_host::HandlerPtr(shared.get(), [](app::Handler*) {});
  });
  CHECK(hammer(host.address(), "/count") == kClients * kRequestsEach);
  CHECK(shared->calls_ == kClients * kRequestsEach);
  auto client = fcgi_test::Client::connect(host.address());
  fcgi_test::Response stream = client.request("GET", "/stream");
  CHECK(stream.status == 200);
  CHECK(stream.body == "data: tick 0\n\ndata: tick 1\n\ndata: tick 2\n\n");
}

TEST_CASE("threads: one handler instance per thread (on_thread_start each), hammered") {
  g_instances = 0;
  g_thread_starts = 0;
  {
    fcgi_host::InProcessHost host(threaded(4, false), [] {
      return fcgi_host::HandlerPtr(new PerThread, [](app::Handler* h) { delete h; });
    });
    CHECK(hammer(host.address(), "/count") == kClients * kRequestsEach);
  }
  CHECK(g_instances == 5); // the worker's own, and one per thread
  CHECK(g_thread_starts == 4);
}
