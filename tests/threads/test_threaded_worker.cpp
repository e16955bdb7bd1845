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
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

constexpr int kClients = 8;
constexpr int kRequestsEach = 40;

using namespace std::chrono_literals;

// Shared by every thread: only atomics, and the gate (/quiet-stream, /hold) under its mutex.
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
    // One event, then quiet until the test saw the host's heartbeat (bounded), then the last.
    get("/quiet-stream", [this](const app::Request&, app::Response& res) {
      app::EventStream events = res.event_stream();
      events.send("first");
      {
        std::unique_lock lock(mutex_);
        released_.wait_for(lock, 10s, [this] { return release_; });
      }
      events.send("last");
    });
    // Writes until the client is found gone (bounded: 20 s), and says how it ended.
    get("/flood", [this](const app::Request&, app::Response& res) {
      const std::string chunk(64 * 1024, 'x');
      auto until = std::chrono::steady_clock::now() + 20s;
      bool refused = false;
      while (!refused && std::chrono::steady_clock::now() < until)
        refused = !res.write(chunk);
      flood_ended_ = refused ? 1 : 2;
    });
    // Waits until released (bounded), as a handler waiting on a database would.
    get("/hold", [this](const app::Request&, app::Response& res) {
      holding_ = true;
      std::unique_lock lock(mutex_);
      released_.wait_for(lock, 10s, [this] { return release_; });
      res.set_content(release_ ? "released" : "not released", "text/plain");
    });
    get("/big", [](const app::Request&, app::Response& res) {
      res.set_content(std::string(1 << 20, 'b'), "text/plain");
    });
  }
  void release() {
    std::lock_guard lock(mutex_);
    release_ = true;
    released_.notify_all();
  }
  std::atomic<int> calls_{0};
  std::atomic<int> flood_ended_{0}; // 1: a write returned false, 2: it never did
  std::atomic<bool> holding_{false};
  std::mutex mutex_;
  std::condition_variable released_;
  bool release_ = false;
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

// Answers, calls finish(), then goes on reading its request (which the loop must no longer
// touch: the connection serves its next request meanwhile); on_idle() between bursts.
class FinishesEarly : public app::Router {
public:
  FinishesEarly() {
    get("/early", [this](const app::Request& req, app::Response& res) {
      res.set_content(std::string(req.uri()), "text/plain");
      res.finish();
      const std::string uri(req.uri()); // after finish(): still this request's
      if (uri.starts_with("/early?n=") && !res.write("late")) ++done_;
    });
  }
  void on_idle() override { ++idle_runs_; }
  std::atomic<int> done_{0};
  std::atomic<int> idle_runs_{0};
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

TEST_CASE("threads: handlers that finish() early and go on, hammered on kept connections, and "
          "on_idle() in each thread after the burst") {
  auto shared = std::make_shared<FinishesEarly>();
  fcgi_host::WorkerSettings settings = threaded(4, true);
  settings.idle_work_after_ns = 50'000'000; // 50 ms
  fcgi_host::InProcessHost host(
      settings, [shared] { return fcgi_host::HandlerPtr(shared.get(), [](app::Handler*) {}); });
  CHECK(hammer(host.address(), "/early?n=1") == kClients * kRequestsEach);
  // Every handler's work after its answer ends (bounded), and each thread's idle work runs.
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while ((shared->done_ < kClients * kRequestsEach || shared->idle_runs_ < 4) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  CHECK(shared->done_ == kClients * kRequestsEach);
  CHECK(shared->idle_runs_ >= 4);
  auto client = fcgi_test::Client::connect(host.address());
  CHECK(client.request("GET", "/early?n=2").body == "/early?n=2");
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

TEST_CASE("threads: an event stream quiet past the heartbeat interval gets a heartbeat comment "
          "from the loop, between two events") {
  auto shared = std::make_shared<SharedCounter>();
  fcgi_host::WorkerSettings settings = threaded(2, true);
  settings.event_heartbeat_ns = 50'000'000; // 50 ms
  fcgi_host::InProcessHost host(
      settings, [shared] { return fcgi_host::HandlerPtr(shared.get(), [](app::Handler*) {}); });
  auto client = fcgi_test::Client::connect(host.address());
  fcgi_test::Request request;
  request.uri = "/quiet-stream";
  client.send_request(request);
  // The records as they come: the handler waits until a heartbeat followed its first event.
  std::string out;
  bool ended = false;
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!ended && std::chrono::steady_clock::now() < deadline) {
    fcgi_test::RecordResult r = client.read_record(fcgi_test::Millis{10000});
    REQUIRE(r.status == fcgi_test::IoStatus::Ok);
    if (r.record.type == fcgi_test::RecordType::Stdout) out += r.record.content;
    ended = r.record.type == fcgi_test::RecordType::EndRequest;
    std::size_t first = out.find("data: first\n\n");
    if (first != std::string::npos && out.find(": heartbeat\n\n", first) != std::string::npos)
      shared->release();
  }
  shared->release();
  INFO("stream:\n" << out);
  CHECK(ended);
  std::size_t first = out.find("data: first\n\n");
  std::size_t beat = out.find("\n\n: heartbeat\n\n");
  std::size_t last = out.find("\n\ndata: last\n\n");
  REQUIRE(first != std::string::npos);
  CHECK(beat != std::string::npos);
  CHECK(last != std::string::npos);
  CHECK(first < beat);
  CHECK(beat < last);
  // The connection serves on.
  CHECK(client.request("GET", "/count").status == 200);
}

TEST_CASE("threads: a client that stops reading a streamed response holds its handler thread "
          "only until --write-timeout, and the worker serves on") {
  auto shared = std::make_shared<SharedCounter>();
  fcgi_host::WorkerSettings settings = threaded(2, true);
  settings.limits.write_timeout = std::chrono::milliseconds(300);
  fcgi_host::InProcessHost host(
      settings, [shared] { return fcgi_host::HandlerPtr(shared.get(), [](app::Handler*) {}); });
  auto stalled = fcgi_test::Client::connect(host.address());
  fcgi_test::Request request;
  request.uri = "/flood";
  stalled.send_request(request); // and never reads
  auto deadline = std::chrono::steady_clock::now() + 10s;
  while (shared->flood_ended_ == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::yield();
  CHECK(shared->flood_ended_ == 1); // its write returned false: the thread is free again
  // Both threads serve: the stalled one's came back.
  auto a = fcgi_test::Client::connect(host.address());
  auto b = fcgi_test::Client::connect(host.address());
  CHECK(a.request("GET", "/count").status == 200);
  CHECK(b.request("GET", "/count").status == 200);
  // The stalled client's connection was ended: what it reads now ends in a close.
  CHECK(stalled.read_until_closed(fcgi_test::Millis{10000}).status == fcgi_test::IoStatus::Closed);
}

TEST_CASE("threads: a handler that waits on the loop's own thread does not hold the loop: the "
          "other threads answer meanwhile, and its answer comes whole") {
  for (unsigned threads : {2u, 4u}) {
    CAPTURE(threads);
    auto shared = std::make_shared<SharedCounter>();
    fcgi_host::InProcessHost host(threaded(threads, true), [shared] {
      return fcgi_host::HandlerPtr(shared.get(), [](app::Handler*) {});
    });
    // An idle worker's first request runs on the loop's thread (lane 0).
    auto held = fcgi_test::Client::connect(host.address());
    fcgi_test::Request request;
    request.uri = "/hold";
    const std::uint16_t id = held.send_request(request);
    auto deadline = std::chrono::steady_clock::now() + 10s;
    while (!shared->holding_ && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    REQUIRE(shared->holding_);
    // Served by the other threads while /hold waits (the relay took the loop over).
    auto other = fcgi_test::Client::connect(host.address());
    for (int i = 0; i < 20; ++i)
      CHECK(other.request("GET", "/count").status == 200);
    fcgi_test::Response big = other.request("GET", "/big");
    CHECK(big.status == 200);
    CHECK(big.body.size() == std::size_t{1} << 20);
    CHECK(shared->calls_ == 20);
    shared->release();
    fcgi_test::Response answer = held.read_response(id);
    CHECK(answer.status == 200);
    CHECK(answer.body == "released");
    // And the loop is the loop's thread's again: its connection serves on, large answers too.
    CHECK(held.request("GET", "/count").status == 200);
    CHECK(held.request("GET", "/big").body.size() == std::size_t{1} << 20);
  }
}
