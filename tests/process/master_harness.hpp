#pragma once
// The one harness of the process-layer master tests: the test forks a child that runs a Master
// whose workers are tiny lambdas, with the master's log in a file of its own and a probe in
// shared memory to steer and count the workers. Tests wait for events (a log line, a scoreboard
// state, the master's exit), never for time.
//
// The test process is a child subreaper, so workers orphaned by a killed master are reparented to
// it and can be reaped and checked by pid. The destructor kills and reaps every process the test
// started, by pid, and removes the log.
#include "process_manager/master.hpp"
#include "support/files.hpp"
#include "support/wait.hpp"

#include <atomic>
#include <csignal>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace pm_test {

using process_manager::Generation;
using process_manager::MasterOptions;
using process_manager::WorkerContext;
using process_manager::WorkerState;
using test_wait::Millis;

// Shared by the test, the master and the workers: mapped before the first fork.
struct Probe {
  std::atomic<int> boots{0};  // worker_main calls
  std::atomic<int> quits{0};  // workers that stopped on SIGQUIT
  std::atomic<int> in_job{0}; // a worker has started its job
  std::atomic<int> reloads{0};
  std::atomic<int> reopens{0};    // USR1 in the master and in the workers
  std::atomic<int> boot_gate{1};  // 0: workers that wait for it hold their boot
  std::atomic<int> make_busy{0};  // steerable workers: each token makes one go Handling
  std::atomic<int> release{0};    // set: busy steerable workers go back to Idle
  std::atomic<int> let_boot{0};   // set: workers that hold their boot for it go on
  std::atomic<pid_t> booting{0};  // the last worker that held its boot for let_boot
  std::atomic<int> mold_boots{0}; // MoldPlan::boot calls (--mold)
  std::atomic<int> mold_kept{0};  // of them, those handed an earlier mold's kept descriptor
};

// The probe of the running test (valid in the test, the master and the workers).
Probe& probe();

// ---- worker behaviours --------------------------------------------------------------------------

// Installs handlers for TERM, QUIT, INT (a stop) and USR1 (counted in probe().reopens).
void install_worker_handlers();
// Sleeps in sigsuspend until a stop signal came; returns it.
int wait_for_stop_signal();
// Ready at once, idle until told to stop (counting a QUIT in probe().quits), then exits 0.
int serve(const WorkerContext& ctx);
// serve(), counting its boot in probe().boots.
int well_behaved(const WorkerContext& ctx);
// Ready, and deaf to every signal but SIGKILL.
int deaf(const WorkerContext& ctx);
// Idle until stopped; takes a probe().make_busy token when offered (Handling, one request) and
// holds it until probe().release is set.
int steerable(const WorkerContext& ctx);

// A generation of `workers` running `main`, graceful_timeout 3 s.
Generation generation(int workers, std::function<int(const WorkerContext&)> main);

// ---- the master under test ----------------------------------------------------------------------

class MasterUnderTest {
public:
  explicit MasterUnderTest(Generation first, MasterOptions options = {});
  ~MasterUnderTest();
  MasterUnderTest(const MasterUnderTest&) = delete;
  MasterUnderTest& operator=(const MasterUnderTest&) = delete;

  pid_t pid() const { return pid_; }
  Probe& probe() { return pm_test::probe(); }

  // Pids of workers past Starting (of one generation, or of any when 0).
  std::vector<pid_t> ready(std::uint32_t generation = 0);
  int count(WorkerState state); // live workers in `state`
  int live();                   // slots in use
  std::size_t live_seen();      // workers ever seen by ready() still running

  // The master's log (Info and up, workers' lines too).
  std::string log() const;
  std::size_t log_count(const std::string& pattern) const; // lines matching the regex
  // Waits until the log holds at least `count` lines matching `pattern` (a regex).
  bool wait_log(const std::string& pattern, Millis timeout = Millis{3000}, std::size_t count = 1);
  // Waits until the master has finished a whole turn of its loop after this call: any change it
  // would make from the state seen now (spawn, retire) is made by then. It asks for turns with
  // USR2, which a master without `upgrade_exec` logs and ignores.
  bool wait_master_turn(Millis timeout = Millis{3000});

  template <class Pred> bool wait_until(Pred pred, Millis timeout) {
    return test_wait::wait_until(pred, timeout);
  }

  void signal(int sig);
  // The master's exit status (reaped), or -1 if it is still running after `timeout`.
  int wait_exit(Millis timeout);
  // TERM, then wait_exit(3 s).
  int stop();

private:
  std::unique_ptr<process_manager::Master> master_;
  pid_t pid_ = -1;
  test_support::TempDir dir_{"pm-test"}; // the master's log
  std::string log_path_;
  std::set<pid_t> seen_;
};

} // namespace pm_test
