// Process tests of the master's lifecycle features: systemd notifications, dynamic and ondemand
// pools. Same shape as test_pm_master.cpp: the test forks a child that runs a Master whose
// workers are tiny lambdas, with a shared-memory probe to steer them.
#include "process_manager/clock.hpp"
#include "process_manager/exit_codes.hpp"
#include "process_manager/master.hpp"

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <doctest/doctest.h>
#include <string>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace process_manager;
using namespace std::chrono_literals;

namespace {

struct LcProbe {
  std::atomic<int> make_busy{0}; // a worker that takes one of these goes Handling
  std::atomic<int> release{0};   // set: busy workers go back to Idle
};

LcProbe* g_lc = nullptr;
volatile sig_atomic_t g_lc_stop = 0;

extern "C" void lc_on_stop(int) {
  g_lc_stop = 1;
}

// Idle until stopped; takes a "busy" token when one is offered and holds it until released.
int steerable(const WorkerContext& ctx) {
  struct sigaction sa {};
  sa.sa_handler = lc_on_stop;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGQUIT, SIGINT})
    sigaction(sig, &sa, nullptr);
  ctx.slot.state = WorkerState::Idle;
  bool busy = false;
  for (int i = 0; i < 6000 && !g_lc_stop; ++i) { // 30 s at most
    if (!busy) {
      int n = g_lc->make_busy.load();
      if (n > 0 && g_lc->make_busy.compare_exchange_strong(n, n - 1)) {
        busy = true;
        ctx.slot.requests++;
        ctx.slot.state = WorkerState::Handling;
      }
    } else if (g_lc->release) {
      busy = false;
      ctx.slot.state = WorkerState::Idle;
    }
    usleep(5000);
  }
  return exit_code::kWorkerDone;
}

class Harness {
public:
  Harness(Generation g, MasterOptions o = {}) {
    static bool subreaper = prctl(PR_SET_CHILD_SUBREAPER, 1) == 0;
    REQUIRE(subreaper);
    void* p =
        mmap(nullptr, sizeof(LcProbe), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    REQUIRE(p != MAP_FAILED);
    g_lc = new (p) LcProbe;
    o.scoreboard_capacity = 16;
    master_ = std::make_unique<Master>(std::move(g), std::move(o));
    pid_ = fork();
    REQUIRE(pid_ != -1);
    if (pid_ == 0) _exit(master_->run());
  }
  ~Harness() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    // Workers die with the master (PR_SET_PDEATHSIG); reap them (we are their subreaper).
    std::uint64_t end = monotonic_ns() + 2'000'000'000ull;
    while (monotonic_ns() < end && waitpid(-1, nullptr, WNOHANG) >= 0)
      usleep(2000);
    munmap(g_lc, sizeof(LcProbe));
  }

  // Live workers by state.
  int count(WorkerState st) {
    int n = 0;
    for (std::size_t i = 0; i < master_->scoreboard().capacity(); ++i) {
      const WorkerSlot& s = master_->scoreboard().slot(i);
      n += s.pid != 0 && s.state == st;
    }
    return n;
  }
  int live() {
    int n = 0;
    for (std::size_t i = 0; i < master_->scoreboard().capacity(); ++i)
      n += master_->scoreboard().slot(i).state != WorkerState::Free;
    return n;
  }
  template <class Pred> bool wait_until(Pred pred, std::chrono::milliseconds timeout) {
    std::uint64_t deadline = monotonic_ns() + timeout.count() * 1'000'000ull;
    while (!pred()) {
      if (monotonic_ns() > deadline) return false;
      usleep(2000);
    }
    return true;
  }
  int stop() {
    kill(pid_, SIGTERM);
    int status = 0;
    bool exited = wait_until([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, 3s);
    if (!exited) return -1;
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
  void signal(int sig) { kill(pid_, sig); }

private:
  std::unique_ptr<Master> master_;
  pid_t pid_ = -1;
};

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
    timeval tv{0, 100'000};
    setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ~NotifySocket() { close(fd_); }
  const std::string& name() const { return name_; }
  // Messages received within `timeout`, WATCHDOG=1 counted apart.
  void collect(std::chrono::milliseconds timeout) {
    std::uint64_t end = monotonic_ns() + timeout.count() * 1'000'000ull;
    while (monotonic_ns() < end) {
      char buf[512];
      ssize_t n = recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) continue;
      std::string m(buf, static_cast<std::size_t>(n));
      if (m == "WATCHDOG=1")
        ++watchdogs;
      else
        messages.push_back(m);
    }
  }
  std::vector<std::string> messages;
  int watchdogs = 0;

private:
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
  Harness m(gen(2), o); // the notifier reads the environment when the master is built
  unsetenv("NOTIFY_SOCKET");
  unsetenv("WATCHDOG_USEC");
  REQUIRE(m.wait_until([&] { return m.count(WorkerState::Idle) == 2; }, 3s));
  sd.collect(400ms);
  m.signal(SIGHUP);
  sd.collect(600ms);
  CHECK(m.stop() == exit_code::kOk);
  sd.collect(200ms);
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
  Harness m(g);
  REQUIRE(m.wait_until([&] { return m.count(WorkerState::Idle) == 2; }, 3s));
  g_lc->make_busy = 2; // both busy: one spare is spawned
  CHECK(m.wait_until(
      [&] { return m.count(WorkerState::Handling) == 2 && m.count(WorkerState::Idle) == 1; }, 2s));
  g_lc->make_busy = 3; // everything busy: the pool grows to max_workers and no further
  CHECK(m.wait_until([&] { return m.count(WorkerState::Handling) == 4; }, 3s));
  usleep(300'000);
  CHECK(m.live() == 4);
  g_lc->make_busy = 0;
  g_lc->release = 1; // 4 idle > max_spare 2: retired one per turn down to 2
  CHECK(m.wait_until([&] { return m.live() == 2 && m.count(WorkerState::Idle) == 2; }, 3s));
  usleep(300'000);
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
  Harness m(g, o);
  usleep(300'000);
  CHECK(m.live() == 0);
  int client = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  std::uint64_t t0 = monotonic_ns();
  REQUIRE(connect(client, reinterpret_cast<sockaddr*>(&a), alen) == 0);
  CHECK(m.wait_until([&] { return m.count(WorkerState::Idle) == 1; }, 1s));
  MESSAGE("ondemand: connection to idle worker in " << (monotonic_ns() - t0) / 1'000'000 << " ms");
  usleep(100'000);
  CHECK(m.live() == 1);                                   // the queue is empty: no second worker
  CHECK(m.wait_until([&] { return m.live() == 0; }, 2s)); // idle past idle_timeout
  CHECK(m.stop() == exit_code::kOk);
  close(client);
  close(lfd);
}
