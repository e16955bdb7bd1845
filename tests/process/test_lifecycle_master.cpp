// Process tests of the master's lifecycle features: systemd notifications, dynamic and ondemand
// pools (tests/process/master_harness.hpp runs the master in a child with steerable workers).
#include "master_harness.hpp"
#include "process_manager/clock.hpp"
#include "process_manager/exit_codes.hpp"

#include <cstdlib>
#include <cstring>
#include <doctest/doctest.h>
#include <string>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>
#include <vector>

using namespace process_manager;
using namespace pm_test;
using namespace std::chrono_literals;

namespace {

Generation gen(int workers, PoolMode mode = PoolMode::Static) {
  Generation g;
  g.pool.workers = workers;
  g.pool.mode = mode;
  g.pool.graceful_timeout = 2s;
  g.worker_main = steerable;
  return g;
}

// A datagram socket bound to an abstract name, standing in for systemd's notify socket.
class NotifySocket {
public:
  NotifySocket() {
    fd_ = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    REQUIRE(fd_ >= 0);
    name_ = "@fcgi-host-test-notify-" + std::to_string(getpid());
    sockaddr_un a{};
    a.sun_family = AF_UNIX;
    std::memcpy(a.sun_path + 1, name_.c_str() + 1, name_.size() - 1);
    REQUIRE(bind(fd_, reinterpret_cast<sockaddr*>(&a),
                 static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name_.size())) == 0);
  }
  ~NotifySocket() { close(fd_); }
  const std::string& name() const { return name_; }
  // Receives messages until `done()` holds; false if it does not within `timeout`.
  template <class Done> bool collect_until(Done done, Millis timeout) {
    auto deadline = test_wait::Clock::now() + timeout;
    while (!done()) {
      auto left = std::chrono::duration_cast<Millis>(deadline - test_wait::Clock::now());
      if (left.count() <= 0 || !test_wait::wait_readable(fd_, left)) return done();
      receive(0);
    }
    return true;
  }
  // Takes what has arrived already.
  void drain() {
    while (receive(MSG_DONTWAIT)) {}
  }
  std::vector<std::string> messages; // WATCHDOG=1 counted apart
  int watchdogs = 0;

private:
  bool receive(int flags) {
    char buf[512];
    ssize_t n = recv(fd_, buf, sizeof buf, flags);
    if (n <= 0) return false;
    std::string m(buf, static_cast<std::size_t>(n));
    if (m == "WATCHDOG=1")
      ++watchdogs;
    else
      messages.push_back(m);
    return true;
  }
  int fd_ = -1;
  std::string name_;
};

} // namespace

TEST_CASE("lifecycle: systemd notifications arrive in order across a reload") {
  NotifySocket sd;
  setenv("NOTIFY_SOCKET", sd.name().c_str(), 1);
  setenv("WATCHDOG_USEC", "200000", 1); // WATCHDOG=1 every 100 ms
  MasterOptions o;
  o.reload = [] { return std::optional<Generation>(gen(2)); };
  MasterUnderTest m(gen(2), o); // the notifier reads the environment when the master is built
  unsetenv("NOTIFY_SOCKET");
  unsetenv("WATCHDOG_USEC");
  REQUIRE(m.wait_until([&] { return m.count(WorkerState::Idle) == 2; }, 3s));
  REQUIRE(sd.collect_until([&] { return sd.messages.size() == 1; }, 3s)); // READY=1
  m.signal(SIGHUP);
  CHECK(sd.collect_until([&] { return sd.messages.size() == 3; }, 3s)); // RELOADING, READY
  CHECK(sd.collect_until([&] { return sd.watchdogs >= 5; }, 3s));
  CHECK(m.stop() == exit_code::kOk);
  sd.drain(); // STOPPING=1 was sent before the master exited
  INFO("messages: " << doctest::toString(sd.messages.size()));
  REQUIRE(sd.messages.size() == 4);
  CHECK(sd.messages[0] == "READY=1");
  CHECK(sd.messages[1].starts_with("RELOADING=1\nMONOTONIC_USEC="));
  CHECK(sd.messages[2] == "READY=1");
  CHECK(sd.messages[3] == "STOPPING=1");
  CHECK(sd.watchdogs >= 5);
}

TEST_CASE("lifecycle: dynamic pool keeps min..max spare idle workers, at most max_workers") {
  Generation g = gen(2, PoolMode::Dynamic);
  g.pool.min_spare = 1;
  g.pool.max_spare = 2;
  g.pool.max_workers = 4;
  MasterUnderTest m(g);
  REQUIRE(m.wait_until([&] { return m.count(WorkerState::Idle) == 2; }, 3s));
  m.probe().make_busy = 2; // both busy: one spare is spawned
  CHECK(m.wait_until(
      [&] { return m.count(WorkerState::Handling) == 2 && m.count(WorkerState::Idle) == 1; }, 2s));
  m.probe().make_busy = 3; // everything busy: the pool grows to max_workers and no further
  CHECK(m.wait_until([&] { return m.count(WorkerState::Handling) == 4; }, 3s));
  CHECK(m.wait_master_turn()); // a turn with every worker busy: no fifth
  CHECK(m.live() == 4);
  m.probe().make_busy = 0;
  m.probe().release = 1; // 4 idle > max_spare 2: retired one per turn down to 2
  CHECK(m.wait_until([&] { return m.live() == 2 && m.count(WorkerState::Idle) == 2; }, 3s));
  CHECK(m.wait_master_turn()); // a turn with 2 idle: none more retired
  CHECK(m.live() == 2);
  CHECK(m.stop() == exit_code::kOk);
}

TEST_CASE("lifecycle: ondemand starts with no worker, spawns for a queued connection, "
          "stops it after idle_timeout") {
  int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(lfd >= 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::string name = "fcgi-host-test-ondemand-" + std::to_string(getpid());
  std::memcpy(a.sun_path + 1, name.c_str(), name.size());
  socklen_t alen = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + 1 + name.size());
  REQUIRE(bind(lfd, reinterpret_cast<sockaddr*>(&a), alen) == 0);
  REQUIRE(listen(lfd, 16) == 0);

  Generation g = gen(3, PoolMode::OnDemand);
  g.pool.max_workers = 2;
  g.pool.idle_timeout = 400ms;
  g.worker_main = [lfd](const WorkerContext& ctx) {
    int c = accept(lfd, nullptr, nullptr); // takes the queued connection
    if (c >= 0) close(c);
    return steerable(ctx);
  };
  MasterOptions o;
  o.listen_fd = lfd;
  MasterUnderTest m(g, o);
  CHECK(m.wait_log("master [0-9]+ started"));
  CHECK(m.wait_master_turn()); // it has looked at its pool: nothing to start
  CHECK(m.live() == 0);
  m.probe().make_busy = 1; // the worker holds its request: no idle_timeout while we look
  int client = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  std::uint64_t t0 = monotonic_ns();
  REQUIRE(connect(client, reinterpret_cast<sockaddr*>(&a), alen) == 0);
  CHECK(m.wait_until([&] { return m.count(WorkerState::Handling) == 1; }, 1s));
  MESSAGE("ondemand: connection to busy worker in " << (monotonic_ns() - t0) / 1'000'000 << " ms");
  CHECK(m.wait_master_turn());
  CHECK(m.live() == 1); // the queue is empty: no second worker
  m.probe().release = 1;
  CHECK(m.wait_until([&] { return m.count(WorkerState::Idle) == 1; }, 1s));
  CHECK(m.wait_until([&] { return m.live() == 0; }, 2s)); // idle past idle_timeout
  CHECK(m.stop() == exit_code::kOk);
  close(client);
  close(lfd);
}
