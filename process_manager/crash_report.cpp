#include "process_manager/crash_report.hpp"

#include "process_manager/clock.hpp"
#include "process_manager/log.hpp"
#include "process_manager/uri_redaction.hpp"

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <unistd.h>
#include <vector>

namespace process_manager {

namespace {

constexpr int kFatalSignals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
// Longer than the master's debugger budget (3 s) plus a turn of its loop, which may itself be
// waiting for another debugger: the master is late, not gone, within this.
constexpr std::uint64_t kWaitForMasterNs = 8'000'000'000;
// A hang inside the handler (a lock a fault left taken, a debugger that never detaches) still
// ends the worker: SIGALRM's default action terminates it.
constexpr unsigned kHandlerAlarmSeconds = 10;
constexpr std::size_t kAltStackSize = 64 * 1024;

WorkerSlot* g_slot = nullptr;
pid_t g_master = 0;
std::atomic<CrashDescriber> g_describe{nullptr};
std::atomic<const void*> g_describe_context{nullptr};
std::atomic<CrashRecorder> g_record{nullptr};
std::atomic<void*> g_record_context{nullptr};

} // namespace

// extern "C" and a fixed name: worker_frames() finds this frame in the debugger's output and
// drops it and the frames above it.
extern "C" void fcgi_host_fatal_signal_handler(int sig, siginfo_t*, void*) {
  // The handler is reset (SA_RESETHAND) and not blocked (SA_NODEFER): a second fault in here
  // kills the worker at once, with the default action.
  sigset_t unblock;
  sigemptyset(&unblock);
  sigaddset(&unblock, sig);
  sigaddset(&unblock, SIGALRM);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigaction(SIGALRM, &dfl, nullptr);
  pthread_sigmask(SIG_UNBLOCK, &unblock, nullptr);
  alarm(kHandlerAlarmSeconds);

  WorkerSlot& s = *g_slot;
  int none = 0;
  // The first fatal signal of the process is reported; a second thread's just dies.
  if (s.crash_signal.compare_exchange_strong(none, sig)) {
    const pid_t tid = static_cast<pid_t>(gettid());
    s.crash_tid.store(tid, std::memory_order_relaxed);
    // The faulting thread's request slot (with one thread: the only one).
    std::size_t threads = s.thread_count();
    for (std::size_t t = 0; t < threads; ++t)
      if (threads <= 1 || s.request(t).tid.load(std::memory_order_relaxed) == tid)
        s.crash_thread.store(static_cast<std::int32_t>(t), std::memory_order_relaxed);
    s.crash_ns.store(monotonic_ns(), std::memory_order_relaxed);
    if (CrashDescriber describe = g_describe.load(std::memory_order_acquire))
      describe(s, g_describe_context.load(std::memory_order_relaxed));
    if (CrashRecorder record = g_record.load(std::memory_order_acquire))
      record(s, sig, g_record_context.load(std::memory_order_relaxed));
    s.crash_state.store(CrashState::Waiting, std::memory_order_release);
    kill(g_master, SIGCHLD); // wakes the master's loop now rather than at its next tick
    std::uint64_t deadline = monotonic_ns() + kWaitForMasterNs;
    while (s.crash_state.load(std::memory_order_acquire) == CrashState::Waiting &&
           monotonic_ns() < deadline) {
      timespec pause{0, 2'000'000};
      nanosleep(&pause, nullptr);
    }
  }
  raise(sig); // the default action now: the worker dies of the signal it caught
}

void install_crash_handler(WorkerSlot& slot, pid_t master) {
  g_slot = &slot;
  g_master = master;
  // Yama (ptrace_scope 1) lets only ancestors attach: the master's debugger is its child.
  prctl(PR_SET_PTRACER, master, 0, 0, 0);
  // A stack overflow faults on the guard page: the handler needs a stack of its own. One per
  // worker, for the thread that installs it (the worker's main thread, where handlers run).
  static void* alt = mmap(nullptr, kAltStackSize, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  int flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER;
  if (alt != MAP_FAILED) {
    stack_t ss{};
    ss.ss_sp = alt;
    ss.ss_size = kAltStackSize;
    if (sigaltstack(&ss, nullptr) == 0) flags |= SA_ONSTACK;
  }
  struct sigaction sa {};
  sa.sa_sigaction = fcgi_host_fatal_signal_handler;
  sa.sa_flags = flags;
  sigemptyset(&sa.sa_mask);
  for (int sig : kFatalSignals)
    sigaction(sig, &sa, nullptr);
}

void give_thread_alt_stack() {
  // Never freed: handler threads live as long as their worker.
  void* alt = mmap(nullptr, kAltStackSize, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
  if (alt == MAP_FAILED) return;
  stack_t ss{};
  ss.ss_sp = alt;
  ss.ss_size = kAltStackSize;
  sigaltstack(&ss, nullptr);
}

void set_crash_describer(CrashDescriber describe, const void* context) {
  g_describe_context.store(context, std::memory_order_relaxed);
  g_describe.store(describe, std::memory_order_release);
}

void set_crash_recorder(CrashRecorder record, void* context) {
  g_record_context.store(context, std::memory_order_relaxed);
  g_record.store(record, std::memory_order_release);
}

bool crash_waiting(const WorkerSlot& slot) {
  return slot.crash_state.load(std::memory_order_acquire) == CrashState::Waiting;
}

void release_crashed(WorkerSlot& slot) {
  slot.crash_state.store(CrashState::Released, std::memory_order_release);
}

bool is_fatal_signal(int sig) {
  for (int s : kFatalSignals)
    if (s == sig) return true;
  return false;
}

namespace {

std::string ms_text(std::uint64_t ns) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f ms", static_cast<double>(ns) / 1e6);
  return buf;
}

// The request of `thread` in flight, or "" when it serves none.
std::string request_in_flight(const WorkerSlot& w, std::size_t thread, std::uint64_t now_ns) {
  const RequestSlot& s = w.request(thread);
  WorkerState state = w.thread_count() <= 1 ? w.state.load(std::memory_order_relaxed)
                                            : s.state.load(std::memory_order_relaxed);
  std::uint64_t start = s.request_start_ns.load(std::memory_order_relaxed);
  if (!is_busy(state) || start == 0) return {};
  Scoreboard::RequestInfo r = Scoreboard::read_request(w, thread);
  redact_shown_uri(r.uri);
  std::uint64_t at = w.crash_ns.load(std::memory_order_relaxed);
  if (at == 0) at = now_ns;
  std::string line = "\"" + std::string(r.method) + " " + r.uri + "\"";
  if (s.route[0] != '\0')
    line += ", route \"" + std::string(s.route, strnlen(s.route, kSlotRouteSize)) + "\"";
  if (r.request_id[0] != '\0') line += ", request id " + std::string(r.request_id);
  line += ", running for " + ms_text(at > start ? at - start : 0);
  std::int64_t queue = s.queue_ns.load(std::memory_order_relaxed);
  line += queue >= 0 ? ", queue time " + ms_text(static_cast<std::uint64_t>(queue))
                     : std::string(", queue time unknown (no X-Request-Start)");
  if (std::uint64_t sent = s.responded_ns.load(std::memory_order_relaxed); sent != 0)
    line += ", after its response had been sent (" + ms_text(at > sent ? at - sent : 0) +
            " before: the client has its answer)";
  return line;
}

// With one thread: its request, or why there is none. With threads: every request in flight,
// one line each, the faulting thread's marked (nginx does not retry the others for their
// clients when they were not idempotent: they are lost with the worker).
std::string requests_lines(const WorkerSlot& w, std::uint64_t now_ns) {
  const std::size_t threads = w.thread_count();
  if (threads <= 1) {
    std::string line = log_escaped(request_in_flight(w, 0, now_ns));
    if (!line.empty()) return "  request in flight: " + line + "\n";
    WorkerState state = w.state.load(std::memory_order_relaxed);
    if (state == WorkerState::Starting)
      return "  no request in flight: the worker was starting (on_worker_start or earlier)\n";
    return std::string("  no request in flight: the worker was ") + to_string(state) + "\n";
  }
  const std::int32_t faulting = w.crash_thread.load(std::memory_order_relaxed);
  std::string mine, others; // the faulting thread's line first
  for (std::size_t t = 0; t < threads; ++t) {
    std::string line = log_escaped(request_in_flight(w, t, now_ns));
    if (line.empty()) continue;
    bool faulted = static_cast<std::int32_t>(t) == faulting;
    (faulted ? mine : others) += "  thread " + std::to_string(t) + " (tid " +
                                 std::to_string(w.request(t).tid.load(std::memory_order_relaxed)) +
                                 ")" + (faulted ? " faulted in request: " : " lost request: ") +
                                 line + "\n";
  }
  std::string lines = mine + others;
  if (lines.empty())
    lines = "  no request in flight in any of its " + std::to_string(threads) + " threads\n";
  return lines;
}

} // namespace

std::uint32_t requests_lost_beside(const WorkerSlot& w) {
  const std::size_t threads = w.thread_count();
  const std::int32_t faulting = w.crash_thread.load(std::memory_order_relaxed);
  std::uint32_t lost = 0;
  for (std::size_t t = 0; threads > 1 && t < threads; ++t)
    lost += static_cast<std::int32_t>(t) != faulting &&
            is_busy(w.request(t).state.load(std::memory_order_relaxed));
  return lost;
}

std::string describe_crash(const WorkerSlot& slot, std::uint64_t now_ns, const std::string& stack) {
  // The requests and the note are the worker's text (a newline in them must not start a line).
  std::string block = requests_lines(slot, now_ns);
  if (slot.crash_note[0] != '\0')
    block +=
        "  " +
        log_escaped(std::string_view(slot.crash_note, strnlen(slot.crash_note, kCrashNoteSize))) +
        "\n";
  std::istringstream in(stack);
  for (std::string line; std::getline(in, line);)
    block += "  " + line + "\n";
  if (!block.empty()) block.pop_back();
  return block;
}

std::string worker_frames(const std::string& frames) {
  // A frame is its "#n" line and the indented lines after it (source, inlined frames).
  std::vector<std::string> list;
  std::istringstream in(frames);
  for (std::string line; std::getline(in, line);) {
    if (line.starts_with("#") || list.empty()) list.emplace_back();
    list.back() += line + "\n";
  }
  auto names = [&list](std::size_t i, std::string_view what) {
    return list[i].substr(0, list[i].find('\n')).find(what) != std::string::npos;
  };
  std::size_t first = 0, end = list.size();
  for (std::size_t i = 0; i < list.size(); ++i)
    if (names(i, "fcgi_host_fatal_signal_handler")) first = i + 1;
  // The signal trampoline is no frame of the program (eu-stack names it, gdb describes it).
  if (first > 0 && first < list.size() &&
      (names(first, "__restore_rt") || names(first, "<signal handler called>")))
    ++first;
  // Below the worker's entry point: the master's frames from before the fork.
  for (std::size_t i = first; i < list.size(); ++i)
    if (names(i, "process_manager::Spawner::run_child")) {
      end = i;
      break;
    }
  if (first >= end) return frames;
  std::string out;
  for (std::size_t i = first; i < end; ++i)
    out += list[i];
  return out;
}

} // namespace process_manager
