// Process tests of the master: the test process forks a child that runs a Master whose workers
// are tiny lambdas. The test is a child subreaper, so workers orphaned by a killed master are
// reparented to it and can be reaped and checked by pid.
#include "process_manager/clock.hpp"
#include "process_manager/exit_codes.hpp"
#include "process_manager/master.hpp"

#include <atomic>
#include <csignal>
#include <cstdlib>
#include <doctest/doctest.h>
#include <filesystem>
#include <fstream>
#include <set>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace process_manager;
using namespace std::chrono_literals;

namespace {

// Shared by the test, the master and the workers: mapped before the first fork.
struct Probe {
  std::atomic<int> boots{0};  // worker_main calls
  std::atomic<int> quits{0};  // workers that stopped on SIGQUIT
  std::atomic<int> in_job{0}; // graceful-stop test: the job has started
  std::atomic<int> reloads{0};
  std::atomic<int> reopens{0}; // USR1 in the master and in the workers
};

Probe* g_probe = nullptr;
volatile sig_atomic_t g_stop = 0; // per worker process

extern "C" void on_stop(int sig) {
  g_stop = sig;
}

extern "C" void on_usr1(int) {
  g_probe->reopens++;
}

void install_worker_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGQUIT, SIGINT})
    sigaction(sig, &sa, nullptr);
  sa.sa_handler = on_usr1;
  sigaction(SIGUSR1, &sa, nullptr);
}

// Ready at once, idle until told to stop, then exits 0.
int serve(const WorkerContext& ctx) {
  install_worker_handlers();
  ctx.slot.state = WorkerState::Idle;
  while (!g_stop)
    usleep(5000);
  if (g_stop == SIGQUIT) g_probe->quits++;
  return exit_code::kWorkerDone;
}

int well_behaved(const WorkerContext& ctx) {
  g_probe->boots++;
  return serve(ctx);
}

Generation generation(int workers, std::function<int(const WorkerContext&)> main) {
  Generation g;
  g.pool.workers = workers;
  g.pool.graceful_timeout = 3s;
  g.worker_main = std::move(main);
  return g;
}

bool alive(pid_t pid) {
  waitpid(pid, nullptr, WNOHANG); // reaps it if it is our (reparented) child
  return kill(pid, 0) == 0 || errno != ESRCH;
}

// Our own descendants only: never signal a pid that might have been recycled by another process.
bool is_our_child(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string comm_end, field;
  std::string line;
  std::getline(stat, line);
  auto close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream rest(line.substr(close + 2));
  char state;
  pid_t ppid = 0;
  rest >> state >> ppid;
  return ppid == getpid();
}

class MasterUnderTest {
public:
  MasterUnderTest(Generation first, MasterOptions options = {}) {
    static bool subreaper = prctl(PR_SET_CHILD_SUBREAPER, 1) == 0;
    REQUIRE(subreaper);
    void* p =
        mmap(nullptr, sizeof(Probe), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    REQUIRE(p != MAP_FAILED);
    g_probe = new (p) Probe;
    options.scoreboard_capacity = 16;
    // Constructed here so that the test sees the scoreboard; run only in the child.
    master_ = std::make_unique<Master>(std::move(first), std::move(options));
    pid_ = fork();
    REQUIRE(pid_ != -1);
    if (pid_ == 0) _exit(master_->run());
  }

  ~MasterUnderTest() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    // The workers die with the master (PR_SET_PDEATHSIG); make sure, by pid, and reap them.
    for (pid_t w : seen_)
      if (is_our_child(w)) kill(w, SIGKILL);
    wait_until([&] { return live_seen() == 0; }, 2s);
    munmap(g_probe, sizeof(Probe));
  }

  pid_t pid() const { return pid_; }
  Probe& probe() { return *g_probe; }
  Scoreboard& scoreboard() { return master_->scoreboard(); }

  // Pids of workers that are past Starting (optionally of one generation).
  std::vector<pid_t> ready(std::uint32_t generation = 0) {
    std::vector<pid_t> out;
    for (std::size_t i = 0; i < scoreboard().capacity(); ++i) {
      const WorkerSlot& s = scoreboard().slot(i);
      pid_t pid = s.pid;
      WorkerState st = s.state;
      if (pid == 0 || st == WorkerState::Free) continue;
      seen_.insert(pid);
      if (st != WorkerState::Starting && (generation == 0 || s.generation == generation))
        out.push_back(pid);
    }
    return out;
  }

  std::size_t live_seen() {
    std::size_t n = 0;
    for (pid_t w : seen_)
      n += alive(w);
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

  // The master's exit status, or -1 if it is still running after `timeout`.
  int wait_exit(std::chrono::milliseconds timeout) {
    int status = 0;
    bool exited = wait_until([&] { return waitpid(pid_, &status, WNOHANG) == pid_; }, timeout);
    if (!exited) return -1;
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  void signal(int sig) { REQUIRE(kill(pid_, sig) == 0); }

private:
  std::unique_ptr<Master> master_;
  pid_t pid_ = -1;
  std::set<pid_t> seen_;
};

std::filesystem::path temp_path(const char* name) {
  return std::filesystem::temp_directory_path() /
         (std::string("pm-test-") + std::to_string(getpid()) + "-" + name);
}

} // namespace

TEST_CASE("master: a worker killed with SIGKILL is replaced within 1 s") {
  MasterUnderTest m(generation(2, well_behaved));
  REQUIRE(m.wait_until([&] { return m.ready().size() == 2; }, 3s));
  pid_t victim = m.ready()[0];
  REQUIRE(kill(victim, SIGKILL) == 0);
  CHECK(m.wait_until(
      [&] {
        auto pids = m.ready();
        return pids.size() == 2 && std::find(pids.begin(), pids.end(), victim) == pids.end();
      },
      1s));
  m.signal(SIGTERM);
  CHECK(m.wait_exit(3s) == exit_code::kOk);
}

TEST_CASE("master: a slot whose workers crash at once backs off alone; a killed healthy worker "
          "in another slot is replaced at once") {
  // Slot 0 crashes right after its start, in a loop; slot 1 serves.
  MasterUnderTest m(generation(2, [](const WorkerContext& ctx) {
    if (ctx.slot_index != 0) return serve(ctx);
    g_probe->boots++;
    return 1; // a crash: exit code 1
  }));
  std::uint64_t start = monotonic_ns();
  REQUIRE(m.wait_until([&] { return m.probe().boots >= 4; }, 3s));
  std::uint64_t fourth_boot_ms = (monotonic_ns() - start) / 1'000'000;
  pid_t healthy = 0;
  REQUIRE(m.wait_until(
      [&] {
        for (pid_t p : m.ready())
          if (m.scoreboard().slot(1).pid == p) healthy = p;
        return healthy != 0;
      },
      3s));
  // Its backoff (0, 100, 200 ms ...) slowed slot 0 down: not hundreds of boots.
  CHECK(fourth_boot_ms >= 250);
  std::uint64_t killed = monotonic_ns();
  REQUIRE(kill(healthy, SIGKILL) == 0);
  CHECK(m.wait_until(
      [&] {
        pid_t now = m.scoreboard().slot(1).pid;
        return now != 0 && now != healthy &&
               m.scoreboard().slot(1).state.load() != WorkerState::Starting;
      },
      1s));
  MESSAGE("slot 0 crash loop: 4th boot after " << fourth_boot_ms
                                               << " ms; slot 1's killed worker replaced in "
                                               << (monotonic_ns() - killed) / 1'000'000 << " ms");
  m.signal(SIGTERM);
  CHECK(m.wait_exit(3s) == exit_code::kOk);
}

TEST_CASE("master: TERM lets the request in flight finish, then exits 0") {
  static std::filesystem::path marker;
  marker = temp_path("marker");
  std::filesystem::remove(marker);
  MasterUnderTest m(generation(1, [](const WorkerContext& ctx) {
    install_worker_handlers();
    ctx.slot.state = WorkerState::Handling;
    g_probe->in_job = 1;
    std::uint64_t end = monotonic_ns() + 1'000'000'000;
    while (monotonic_ns() < end)
      usleep(10'000); // the 1 s job, undisturbed by SIGTERM
    std::ofstream(marker) << "done\n";
    ctx.slot.state = WorkerState::Idle;
    while (!g_stop)
      usleep(5000);
    return exit_code::kWorkerDone;
  }));
  REQUIRE(m.wait_until([&] { return m.probe().in_job == 1; }, 3s));
  std::uint64_t sent = monotonic_ns();
  m.signal(SIGTERM);
  CHECK(m.wait_exit(4s) == exit_code::kOk);
  CHECK(monotonic_ns() - sent > 500'000'000); // it waited for the job
  CHECK(std::filesystem::exists(marker));
  std::filesystem::remove(marker);
}

TEST_CASE("master: workers die within 1 s of the master being killed") {
  MasterUnderTest m(generation(2, well_behaved));
  REQUIRE(m.wait_until([&] { return m.ready().size() == 2; }, 3s));
  std::vector<pid_t> workers = m.ready();
  m.signal(SIGKILL);
  CHECK(m.wait_exit(1s) == 128 + SIGKILL);
  CHECK(m.wait_until(
      [&] {
        return std::none_of(workers.begin(), workers.end(), [](pid_t w) { return alive(w); });
      },
      1s));
}

TEST_CASE("master: a worker that fails to boot stops the master with code 1, no loop") {
  MasterUnderTest m(generation(2, [](const WorkerContext&) {
    g_probe->boots++;
    return exit_code::kWorkerBootFailure;
  }));
  CHECK(m.wait_exit(3s) == exit_code::kFailure);
  CHECK(m.probe().boots <= 2);
}

TEST_CASE("master: HUP starts generation 2, then retires generation 1 without a gap") {
  MasterOptions options;
  options.reload = [] { return std::optional<Generation>(generation(2, well_behaved)); };
  MasterUnderTest m(generation(2, well_behaved), options);
  REQUIRE(m.wait_until([&] { return m.ready(1).size() == 2; }, 3s));
  m.signal(SIGHUP);
  std::size_t fewest = 2;
  bool done = m.wait_until(
      [&] {
        fewest = std::min(fewest, m.ready().size());
        return m.ready(1).empty() && m.ready(2).size() == 2;
      },
      3s);
  CHECK(done);
  CHECK(fewest > 0);
  CHECK(m.wait_until([&] { return m.probe().quits == 2; }, 1s)); // generation 1 got SIGQUIT
  m.signal(SIGTERM);
  CHECK(m.wait_exit(3s) == exit_code::kOk);
}

TEST_CASE("master: a failed reload keeps generation 1") {
  MasterOptions options;
  options.reload = [] { return std::optional<Generation>(); };
  MasterUnderTest m(generation(2, well_behaved), options);
  REQUIRE(m.wait_until([&] { return m.ready(1).size() == 2; }, 3s));
  std::vector<pid_t> before = m.ready(1);
  m.signal(SIGHUP);
  usleep(300'000);
  CHECK(m.ready() == before);
  CHECK(m.probe().boots == 2);
  m.signal(SIGTERM);
  CHECK(m.wait_exit(3s) == exit_code::kOk);
}

TEST_CASE("master: TTIN and TTOU change the number of workers, never below 1") {
  MasterUnderTest m(generation(2, well_behaved));
  REQUIRE(m.wait_until([&] { return m.ready().size() == 2; }, 3s));
  m.signal(SIGTTIN);
  CHECK(m.wait_until([&] { return m.ready().size() == 3; }, 2s));
  for (int i = 0; i < 3; ++i) {
    m.signal(SIGTTOU);
    usleep(50'000);
  }
  CHECK(m.wait_until([&] { return m.ready().size() == 1; }, 2s));
  usleep(300'000);
  CHECK(m.ready().size() == 1);
  CHECK(m.probe().quits == 2); // retired with SIGQUIT
  m.signal(SIGTERM);
  CHECK(m.wait_exit(3s) == exit_code::kOk);
}

TEST_CASE("master: a request past request_timeout gets its worker killed and replaced") {
  Generation g = generation(1, [](const WorkerContext& ctx) {
    if (g_probe->boots++ == 0) { // the first worker hangs in a request, deaf to signals
      ctx.slot.request_start_ns = monotonic_ns();
      Scoreboard::set_request(ctx.slot, "GET", 3, "/stuck", 6);
      ctx.slot.state = WorkerState::Handling;
      sigset_t all;
      sigfillset(&all);
      sigprocmask(SIG_BLOCK, &all, nullptr);
      for (;;)
        pause();
    }
    return serve(ctx);
  });
  g.pool.request_timeout = 300ms;
  MasterUnderTest m(g);
  REQUIRE(m.wait_until([&] { return m.ready().size() == 1; }, 3s));
  pid_t stuck = m.ready()[0];
  CHECK(m.wait_until(
      [&] {
        auto pids = m.ready();
        return m.probe().boots == 2 && pids.size() == 1 && pids[0] != stuck;
      },
      2s));
  CHECK(m.wait_until([&] { return !alive(stuck); }, 1s));
  m.signal(SIGTERM);
  CHECK(m.wait_exit(3s) == exit_code::kOk);
}

TEST_CASE("master: USR1 reopens logs in the master and every worker") {
  MasterOptions options;
  options.reopen_logs = [] { g_probe->reopens++; };
  MasterUnderTest m(generation(2, well_behaved), options);
  REQUIRE(m.wait_until([&] { return m.ready().size() == 2; }, 3s));
  std::vector<pid_t> before = m.ready();
  m.signal(SIGUSR1);
  CHECK(m.wait_until([&] { return m.probe().reopens == 3; }, 1s));
  m.signal(SIGUSR2); // logged, nothing else
  usleep(200'000);
  CHECK(m.ready() == before);
  m.signal(SIGTERM);
  CHECK(m.wait_exit(3s) == exit_code::kOk);
}

// Ready, and deaf to every signal but SIGKILL.
int deaf(const WorkerContext& ctx) {
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, nullptr);
  ctx.slot.state = WorkerState::Idle;
  for (;;)
    pause();
}

TEST_CASE("master: workers still there after graceful_timeout are killed, exit code 0") {
  Generation g = generation(2, deaf);
  g.pool.graceful_timeout = 400ms;
  MasterUnderTest m(g);
  REQUIRE(m.wait_until([&] { return m.ready().size() == 2; }, 3s));
  std::uint64_t sent = monotonic_ns();
  m.signal(SIGTERM);
  CHECK(m.wait_exit(2s) == exit_code::kOk);
  CHECK(monotonic_ns() - sent >= 400'000'000);
}

TEST_CASE("master: INT during a graceful stop escalates to a fast stop") {
  MasterUnderTest m(generation(1, deaf)); // graceful_timeout 3 s
  REQUIRE(m.wait_until([&] { return m.ready().size() == 1; }, 3s));
  m.signal(SIGTERM);
  usleep(100'000);
  m.signal(SIGTERM); // nothing new
  std::uint64_t sent = monotonic_ns();
  m.signal(SIGINT);
  CHECK(m.wait_exit(2s) == exit_code::kOk); // SIGKILL 1 s after INT, not 3 s after TERM
  CHECK(monotonic_ns() - sent >= 900'000'000);
}

TEST_CASE("master: a HUP during a reload is queued and done afterwards") {
  MasterOptions options;
  options.reload = [] {
    g_probe->reloads++;
    return std::optional<Generation>(generation(1, [](const WorkerContext& ctx) {
      usleep(300'000); // a slow boot keeps the reload in progress
      return serve(ctx);
    }));
  };
  MasterUnderTest m(generation(1, well_behaved), options);
  REQUIRE(m.wait_until([&] { return m.ready(1).size() == 1; }, 3s));
  m.signal(SIGHUP);
  usleep(50'000);
  m.signal(SIGHUP);
  CHECK(m.wait_until([&] { return m.ready(3).size() == 1 && m.ready().size() == 1; }, 3s));
  CHECK(m.probe().reloads == 2);
  m.signal(SIGTERM);
  CHECK(m.wait_exit(3s) == exit_code::kOk);
}

TEST_CASE("master: a new generation not ready within graceful_timeout is abandoned") {
  MasterOptions options;
  options.reload = [] {
    Generation g = generation(1, [](const WorkerContext&) {
      for (;;)
        pause(); // never leaves Starting
      return 0;
    });
    g.pool.graceful_timeout = 300ms;
    return std::optional<Generation>(std::move(g));
  };
  MasterUnderTest m(generation(2, well_behaved), options);
  REQUIRE(m.wait_until([&] { return m.ready(1).size() == 2; }, 3s));
  std::vector<pid_t> before = m.ready(1);
  m.signal(SIGHUP);
  usleep(1'000'000); // past the deadline, and past the 1 s kill of the abandoned workers
  CHECK(m.ready() == before);
  CHECK(m.probe().quits == 0);
  m.signal(SIGTERM);
  CHECK(m.wait_exit(3s) == exit_code::kOk);
}

TEST_CASE("master: a boot failure in a new generation keeps the old one serving") {
  MasterOptions options;
  options.reload = [] {
    return std::optional<Generation>(
        generation(2, [](const WorkerContext&) { return exit_code::kWorkerBootFailure; }));
  };
  MasterUnderTest m(generation(2, well_behaved), options);
  REQUIRE(m.wait_until([&] { return m.ready(1).size() == 2; }, 3s));
  std::vector<pid_t> before = m.ready(1);
  m.signal(SIGHUP);
  usleep(500'000);
  CHECK(m.ready() == before);
  CHECK(m.wait_exit(0ms) == -1); // still running
  m.signal(SIGTERM);
  CHECK(m.wait_exit(3s) == exit_code::kOk);
}
