#include "master_harness.hpp"

#include "process_manager/exit_codes.hpp"
#include "process_manager/log.hpp"
#include "support/files.hpp"

#include <cstdlib>
#include <doctest/doctest.h>
#include <filesystem>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace pm_test {

using namespace process_manager;

namespace {

Probe* g_probe = nullptr;
volatile sig_atomic_t g_stop = 0; // per worker process: the stop signal received

extern "C" void on_stop(int sig) {
  g_stop = sig;
}

extern "C" void on_usr1(int) {
  g_probe->reopens++;
}

// Our own child (a worker reparented to us after its master died): never signal a pid that
// might have been recycled by another process.
bool is_our_child(pid_t pid) {
  auto s = test_support::proc_stat(pid);
  return s && s->ppid == getpid();
}

// Reaps every exited child (reparented workers included); true once none is left.
bool reap_children() {
  while (waitpid(-1, nullptr, WNOHANG) > 0) {}
  return waitpid(-1, nullptr, WNOHANG) < 0 && errno == ECHILD;
}

} // namespace

Probe& probe() {
  return *g_probe;
}

// ---- worker behaviours --------------------------------------------------------------------------

void install_worker_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop;
  sigemptyset(&sa.sa_mask);
  for (int sig : {SIGTERM, SIGQUIT, SIGINT})
    sigaction(sig, &sa, nullptr);
  sa.sa_handler = on_usr1;
  sigaction(SIGUSR1, &sa, nullptr);
}

int wait_for_stop_signal() {
  sigset_t stops, old;
  sigemptyset(&stops);
  for (int sig : {SIGTERM, SIGQUIT, SIGINT})
    sigaddset(&stops, sig);
  sigprocmask(SIG_BLOCK, &stops, &old); // no stop lost between the check and the wait
  sigset_t waiting = old;
  for (int sig : {SIGTERM, SIGQUIT, SIGINT})
    sigdelset(&waiting, sig);
  while (!g_stop)
    sigsuspend(&waiting);
  sigprocmask(SIG_SETMASK, &old, nullptr);
  return g_stop;
}

int serve(const WorkerContext& ctx) {
  install_worker_handlers();
  ctx.slot.state = WorkerState::Idle;
  if (wait_for_stop_signal() == SIGQUIT) g_probe->quits++;
  return exit_code::kWorkerDone;
}

int well_behaved(const WorkerContext& ctx) {
  g_probe->boots++;
  return serve(ctx);
}

int deaf(const WorkerContext& ctx) {
  sigset_t all;
  sigfillset(&all);
  sigprocmask(SIG_BLOCK, &all, nullptr);
  ctx.slot.state = WorkerState::Idle;
  for (;;)
    pause();
}

int steerable(const WorkerContext& ctx) {
  install_worker_handlers();
  ctx.slot.state = WorkerState::Idle;
  bool busy = false;
  auto deadline = test_wait::Clock::now() + std::chrono::seconds(30); // bounded, like every loop
  while (!g_stop && test_wait::Clock::now() < deadline) {
    test_wait::wait_until(
        [&] { return g_stop || (busy ? g_probe->release > 0 : g_probe->make_busy > 0); },
        Millis{1000});
    if (!busy) {
      int n = g_probe->make_busy.load();
      if (n > 0 && g_probe->make_busy.compare_exchange_strong(n, n - 1)) {
        busy = true;
        ctx.slot.requests++;
        ctx.slot.state = WorkerState::Handling;
      }
    } else if (g_probe->release) {
      busy = false;
      ctx.slot.state = WorkerState::Idle;
    }
  }
  return exit_code::kWorkerDone;
}

Generation generation(int workers, std::function<int(const WorkerContext&)> main) {
  Generation g;
  g.pool.workers = workers;
  g.pool.graceful_timeout = std::chrono::seconds(3);
  g.worker_main = std::move(main);
  return g;
}

// ---- MasterUnderTest ----------------------------------------------------------------------------

MasterUnderTest::MasterUnderTest(Generation first, MasterOptions options) {
  static bool subreaper = prctl(PR_SET_CHILD_SUBREAPER, 1) == 0;
  REQUIRE(subreaper);
  void* p = mmap(nullptr, sizeof(Probe), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  REQUIRE(p != MAP_FAILED);
  g_probe = new (p) Probe;
  log_path_ = dir_.file("master.log");
  options.scoreboard_capacity = 16;
  // Constructed here so that the test sees the scoreboard; run only in the child.
  master_ = std::make_unique<Master>(std::move(first), std::move(options));
  pid_ = fork();
  REQUIRE(pid_ != -1);
  if (pid_ == 0) {
    Log::get().open(log_path_);
    Log::get().set_level(LogLevel::Info); // spawns and "generation N ready" too
    _exit(master_->run());
  }
}

MasterUnderTest::~MasterUnderTest() {
  if (pid_ > 0) {
    kill(pid_, SIGKILL);
    test_wait::wait_child_exit(pid_, Millis{5000});
  }
  // The workers die with the master (PR_SET_PDEATHSIG); make sure, by pid, and reap them.
  for (pid_t w : seen_)
    if (is_our_child(w)) kill(w, SIGKILL);
  test_wait::wait_until(reap_children, Millis{2000});
  munmap(g_probe, sizeof(Probe));
  g_probe = nullptr;
}

std::vector<pid_t> MasterUnderTest::ready(std::uint32_t generation) {
  Scoreboard& board = master_->scoreboard();
  std::vector<pid_t> out;
  for (std::size_t i = 0; i < board.capacity(); ++i) {
    const WorkerSlot& s = board.slot(i);
    pid_t pid = s.pid;
    WorkerState st = s.state;
    if (pid == 0 || st == WorkerState::Free) continue;
    seen_.insert(pid);
    if (st != WorkerState::Starting && (generation == 0 || s.generation == generation))
      out.push_back(pid);
  }
  return out;
}

int MasterUnderTest::count(WorkerState state) {
  Scoreboard& board = master_->scoreboard();
  int n = 0;
  for (std::size_t i = 0; i < board.capacity(); ++i) {
    const WorkerSlot& s = board.slot(i);
    n += s.pid != 0 && s.state == state;
  }
  return n;
}

int MasterUnderTest::live() {
  Scoreboard& board = master_->scoreboard();
  int n = 0;
  for (std::size_t i = 0; i < board.capacity(); ++i)
    n += board.slot(i).state != WorkerState::Free;
  return n;
}

std::size_t MasterUnderTest::live_seen() {
  reap_children(); // reparented workers that exited are zombies of ours until reaped
  std::size_t n = 0;
  for (pid_t w : seen_)
    n += test_wait::process_running(w);
  return n;
}

std::string MasterUnderTest::log() const {
  return test_wait::read_file(log_path_);
}

std::size_t MasterUnderTest::log_count(const std::string& pattern) const {
  return test_wait::matching_lines(log(), pattern).size();
}

bool MasterUnderTest::wait_log(const std::string& pattern, Millis timeout, std::size_t count) {
  return test_wait::wait_log_line(log_path_, pattern, timeout, count);
}

bool MasterUnderTest::wait_master_turn(Millis timeout) {
  const std::string line = "USR2: binary upgrade not supported";
  // The first USR2 is dispatched in some turn; the second is seen only in a later one, so once
  // its line is there, the turn that saw the first has run to its end.
  for (int i = 0; i < 2; ++i) {
    std::size_t before = log_count(line);
    signal(SIGUSR2);
    if (!wait_log(line, timeout, before + 1)) return false;
  }
  return true;
}

void MasterUnderTest::signal(int sig) {
  REQUIRE(pid_ > 0);
  REQUIRE(kill(pid_, sig) == 0);
}

int MasterUnderTest::wait_exit(Millis timeout) {
  std::optional<int> status = test_wait::wait_child_exit(pid_, timeout);
  if (!status) return -1;
  pid_ = -1;
  return *status;
}

int MasterUnderTest::stop() {
  signal(SIGTERM);
  return wait_exit(Millis{3000});
}

} // namespace pm_test
