#include "fcgi_host/pools/supervisor.hpp"

#include "app/args.hpp"
#include "fcgi_host/config/exec_env.hpp"
#include "fcgi_host/net/fd_from_env.hpp"
#include "fcgi_host/net/systemd_socket.hpp"
#include "fcgi_host/observe/status_client.hpp"
#include "fcgi_host/observe/status_server.hpp"
#include "fcgi_host/pools/cgroups.hpp"
#include "fcgi_host/pools/member.hpp"
#include "fcgi_host/pools/status_page.hpp"
#include "fcgi_host/pools/upgrade.hpp"
#include "fcgi_host/sys_error.hpp"
#include "process_manager/argv.hpp"
#include "process_manager/backoff.hpp"
#include "process_manager/cgroup_v2.hpp"
#include "process_manager/clock.hpp"
#include "process_manager/exit_codes.hpp"
#include "process_manager/fork_clean.hpp"
#include "process_manager/log.hpp"
#include "process_manager/pidfile.hpp"
#include "process_manager/proc_children.hpp"
#include "process_manager/reaper.hpp"
#include "process_manager/signal_pipe.hpp"
#include "process_manager/systemd_notify.hpp"

#include <algorithm>
#include <array>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <memory>
#include <netdb.h>
#include <optional>
#include <sstream>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

namespace fcgi_host {
namespace {

using process_manager::LogLevel;
namespace exit_code = process_manager::exit_code;
using Clock = std::chrono::steady_clock;

// A pool's master killed by a signal is started again as the master starts a crashed worker
// again (process_manager/backoff.hpp: at once, then after 100 ms doubling to 5 s for each death
// within 1 s of its start), and given up after this many such deaths in a row.
constexpr std::size_t kGiveUpAfter = 6;

process_manager::CrashPolicy pool_restarts() {
  process_manager::CrashPolicy::Settings s;
  s.give_up_after = kGiveUpAfter;
  return process_manager::CrashPolicy(s);
}
// USR2: how long the new binary may take to check the configuration (it loads each plugin).
constexpr std::chrono::seconds kUpgradeCheckTimeout{30};

// The address a listening socket is bound to, as ListenAddress::to_string() writes it.
std::string bound_address(int fd) {
  sockaddr_storage a{};
  socklen_t len = sizeof a;
  if (getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) return "";
  if (a.ss_family == AF_UNIX)
    return "unix:" + std::string(reinterpret_cast<sockaddr_un&>(a).sun_path);
  char host[NI_MAXHOST], port[NI_MAXSERV];
  if (getnameinfo(reinterpret_cast<sockaddr*>(&a), len, host, sizeof host, port, sizeof port,
                  NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return "";
  return a.ss_family == AF_INET6 ? "[" + std::string(host) + "]:" + port
                                 : std::string(host) + ":" + port;
}

struct Pool {
  enum class State {
    Running,    // its master runs
    Waiting,    // its master died of a signal; started again at `start_at`
    Restarting, // stopped for a socket change: started again when its master has exited
    Removed,    // no longer in the configuration: stopping for good
    Stopped,    // its master exited on its own (a failure, or a stop sent to it directly)
  };
  explicit Pool(PoolSpec p) : plan(std::move(p)) {}
  PoolSpec plan;
  std::string status_address; // its master's status socket (its own, or one given to it)
  std::string cgroup;         // the cgroup it runs in (memory-max, cpu-weight); empty: none
  State state = State::Running;
  pid_t pid = 0;
  std::uint64_t started_ns = 0;
  Clock::time_point start_at;
  process_manager::CrashPolicy restarts = pool_restarts(); // a reload starts it afresh
  int exit_code = exit_code::kOk;
};

class PoolMaster {
public:
  explicit PoolMaster(SupervisorSpec spec) : spec_(std::move(spec)) {}

  int run(std::vector<PoolSpec> plans) {
    const std::optional<PoolsHandover> handover = take_handover();
    if (handover) cgroups_.resume(handover->cgroup);
    cgroups_.check(plans);
    take_systemd_socket();
    take_pidfile();
    open_status_server(handover ? handover->status_dir : "");
    signals_.install(kSignals);
    // A pool's new master after its own USR2 is its old master's child: when that one exits,
    // it becomes ours (and is adopted, on_exit()), not init's.
    ::prctl(PR_SET_CHILD_SUBREAPER, 1);
    // Not root: the pools' workers share its user; they may not read its memory.
    process_manager::hide_from_own_user();
    start_pools(plans, handover);
    if (!systemd_address_.empty() &&
        std::none_of(pools_.begin(), pools_.end(),
                     [this](const Pool& p) { return p.plan.listen == systemd_address_; }))
      PM_LOG(LogLevel::Warn, "the socket systemd passed (" + systemd_address_ +
                                 ") is no pool's listen address: no pool serves it");
    notifier_.notify("READY=1");
    std::vector<int> watch, ready;
    if (status_) watch.push_back(status_->fd());
    for (;;) {
      for (int sig : signals_.wait(std::chrono::milliseconds{500}, watch, &ready))
        on_signal(sig);
      if (!ready.empty()) status_->serve();
      for (const process_manager::ExitedChild& c : reaper_.reap())
        on_exit(c);
      start_waiting_pools();
      cgroups_.sweep();
      if (std::optional<int> code = finished()) return *code;
    }
  }

private:
  // Every pool of the configuration started, or, after USR2, adopted from the old image.
  void start_pools(std::vector<PoolSpec>& plans, const std::optional<PoolsHandover>& handover) {
    for (PoolSpec& plan : plans) {
      Pool& pool = pools_.emplace_back(std::move(plan));
      pool.cgroup = cgroups_.apply(pool.plan); // at start, a failure stops the start
      if (!handover || !resume(pool, *handover)) start(pool);
    }
    if (handover) resume_removed(*handover);
    std::string names;
    std::size_t running = 0;
    for (const Pool& p : pools_) {
      if (p.state == Pool::State::Removed) continue;
      ++running;
      names += (names.empty() ? "" : ", ") + p.plan.name + " (" + p.plan.listen + ")";
    }
    const std::string upgraded =
        "binary upgrade: the master of the pools (pid " + std::to_string(getpid()) +
        ", the same) runs the new binary; each pool's master upgrades itself now; ";
    PM_LOG(LogLevel::Notice, (handover ? upgraded : "") + "fcgi-host running " +
                                 std::to_string(running) + " pool(s): " + names);
  }

  static constexpr std::array<int, 9> kSignals = {SIGTERM, SIGQUIT, SIGINT,  SIGHUP, SIGUSR1,
                                                  SIGUSR2, SIGTTIN, SIGTTOU, SIGCHLD};

  // Socket activation: systemd's socket goes to the pool that listens on its address (as a
  // single application takes it), and no other pool sees it.
  void take_systemd_socket() {
    if (systemd_socket_count() < 1) return;
    systemd_address_ = bound_address(kSystemdFirstFd);
    ::fcntl(kSystemdFirstFd, F_SETFD, FD_CLOEXEC);
    forget_systemd_sockets();
  }

  void take_pidfile() {
    // After USR2, the lock this master held under its old binary (pools/upgrade.hpp).
    const char* inherited = std::getenv(exec_env::kPidfileFd);
    const int fd = inherited ? std::atoi(inherited) : -1;
    ::unsetenv(exec_env::kPidfileFd);
    if (spec_.pidfile.empty()) {
      if (fd >= 0) ::close(fd);
      return;
    }
    try {
      pidfile_ = fd >= 0 ? std::make_unique<process_manager::Pidfile>(spec_.pidfile, fd)
                         : std::make_unique<process_manager::Pidfile>(spec_.pidfile);
    } catch (const std::exception& e) {
      throw std::runtime_error(std::string("pidfile: ") + e.what() + "; not starting");
    }
  }

  // --status-listen before the first section: this master's own status page (every pool's, with
  // a pool label) and the control socket of `fcgi-host reload POOL` and `scale POOL N`. It asks
  // each pool's master on a status socket of its own, in a private directory, unless the pool
  // names one.
  void open_status_server(const std::string& handed_over_dir) {
    status_dir_ = handed_over_dir; // its pools' masters answer there
    // After USR2: the socket this master served on under its old binary, never closed.
    const int adopted = take_fd_from_env(exec_env::kStatusFd);
    const char* file = std::getenv(exec_env::kStatusFile);
    const SocketFile adopted_file =
        file && spec_.status_listen ? SocketFile::from_text(spec_.status_listen->address.path, file)
                                    : SocketFile{};
    ::unsetenv(exec_env::kStatusFile);
    if (!spec_.status_listen) {
      if (adopted >= 0) ::close(adopted);
      return;
    }
    try {
      status_ = adopted >= 0
                    ? std::make_unique<StatusServer>(
                          std::make_unique<ListenSocket>(adopted, adopted_file,
                                                         spec_.status_listen->address.to_string()),
                          spec_.observability, -1)
                    : std::make_unique<StatusServer>(*spec_.status_listen, spec_.observability, -1);
    } catch (const StartupError& e) {
      // After USR2 the pools run on: this master goes without its page rather than stop them.
      if (handed_over_dir.empty()) throw;
      PM_LOG(LogLevel::Error, std::string("status-listen: ") + e.what() + "; serving without it");
      return;
    }
    status_->set_answer([this](const StatusRequest& q) { return answer_status(q); });
    status_->set_control(
        [this](std::string_view verb, std::string_view args) { return control(verb, args); });
    std::string pattern = (std::filesystem::temp_directory_path() / "fcgi-host-pools-XXXXXX");
    if (status_dir_.empty() && !::mkdtemp(pattern.data()))
      throw std::runtime_error(sys_error("mkdtemp", pattern));
    if (status_dir_.empty()) status_dir_ = pattern;
  }

  // Where the pool's master `pid` answers its status page: its own status-listen, or one in
  // this master's private directory (pools/member.hpp).
  void set_status_address(Pool& pool) const {
    pool.status_address = pool.plan.status_listen;
    if (pool.status_address.empty() && status_)
      pool.status_address = pool_status_address(status_dir_, pool.plan.name, pool.pid);
  }

  void start(Pool& pool) {
    const bool systemd_socket = !systemd_address_.empty() && systemd_address_ == pool.plan.listen;
    int cgroup_fd = -1;
    try {
      if (!pool.cgroup.empty()) cgroup_fd = PoolCgroups::open_procs(pool.cgroup);
    } catch (const std::exception& e) {
      PM_LOG(LogLevel::Error, "pool [" + pool.plan.name + "]: cannot join its cgroup: " + e.what() +
                                  "; it runs without its limits");
    }
    process_manager::Argv argv(pool.plan.args);
    const pid_t parent = getpid();
    const pid_t pid = process_manager::fork_clean([&](const sigset_t& mask) {
      process_manager::restore_signal_mask(mask);
      // A pool's master (and so its workers) never outlives this master.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (getppid() != parent) _exit(exit_code::kFailure);
      if (cgroup_fd >= 0 && !PoolCgroups::join(cgroup_fd)) {
        PM_LOG(LogLevel::Error, "pool [" + pool.plan.name +
                                    "]: " + sys_error("write", pool.cgroup + "/cgroup.procs"));
        _exit(exit_code::kStartupFailure);
      }
      ::setenv(exec_env::kPoolMaster, std::to_string(parent).c_str(), 1);
      if (status_) ::setenv(exec_env::kPoolStatusDir, status_dir_.c_str(), 1);
      ::unsetenv("NOTIFY_SOCKET"); // systemd hears from this master only
      if (systemd_socket && ::fcntl(kSystemdFirstFd, F_SETFD, 0) == 0) pass_systemd_socket();
      ::execv(spec_.executable.c_str(), argv.data());
    });
    if (cgroup_fd >= 0) ::close(cgroup_fd);
    if (pid < 0) {
      PM_LOG(LogLevel::Error,
             "pool [" + pool.plan.name + "]: " + sys_error("fork", "") + "; trying again in 1 s");
      pool.state = Pool::State::Waiting;
      pool.start_at = Clock::now() + std::chrono::seconds{1};
      return;
    }
    pool.pid = pid;
    pool.state = Pool::State::Running;
    pool.started_ns = process_manager::monotonic_ns();
    set_status_address(pool);
  }

  Pool* find(pid_t pid) {
    for (Pool& p : pools_)
      if (p.pid == pid) return &p;
    return nullptr;
  }
  Pool* find(const std::string& name) {
    for (Pool& p : pools_)
      if (p.plan.name == name) return &p;
    return nullptr;
  }

  void send_all(int sig) {
    for (const Pool& p : pools_)
      if (p.pid > 0) ::kill(p.pid, sig);
  }

  void on_signal(int sig) {
    switch (sig) {
    case SIGTERM:
    case SIGQUIT:
    case SIGINT:
      if (!stopping_) notifier_.notify("STOPPING=1");
      stopping_ = true;
      send_all(sig);
      break;
    case SIGHUP:
      if (!stopping_) reload();
      break;
    case SIGUSR1:
      process_manager::Log::get().reopen();
      send_all(SIGUSR1);
      break;
    case SIGUSR2:
      if (!stopping_) upgrade();
      break;
    case SIGTTIN:
    case SIGTTOU:
      PM_LOG(LogLevel::Warn, std::string(strsignal(sig)) +
                                 " names no pool: send it to a pool's own master (its pid is in "
                                 "the log)");
      break;
    default:
      break; // SIGCHLD: the reaper looks
    }
  }

  void on_exit(const process_manager::ExitedChild& c) {
    Pool* pool = find(c.pid);
    if (!pool) return;
    pool->pid = 0;
    const std::string name = "pool [" + pool->plan.name + "]";
    if (pool->state == Pool::State::Removed) {
      PM_LOG(LogLevel::Notice, name + " stopped: it is no longer in the configuration");
      cgroups_.remove(pool->plan.name);
      std::erase_if(pools_,
                    [](const Pool& p) { return p.state == Pool::State::Removed && p.pid == 0; });
      return;
    }
    if (pool->state == Pool::State::Restarting && !stopping_) {
      start(*pool);
      PM_LOG(LogLevel::Notice, name + " started again on " + pool->plan.listen);
      return;
    }
    if (stopping_) {
      pool->state = Pool::State::Stopped;
      return;
    }
    if (c.kind == process_manager::ExitedChild::Kind::Exited && c.code == 0 &&
        adopt_successor(*pool, c.pid))
      return;
    if (c.kind == process_manager::ExitedChild::Kind::Exited) {
      pool->state = Pool::State::Stopped;
      pool->exit_code = c.code;
      PM_LOG(c.code == 0 ? LogLevel::Notice : LogLevel::Error,
             name + " stopped: its master " + process_manager::describe(c) +
                 (c.code == 0 ? "" : " (its last lines say why)") +
                 "; the other pools go on, a reload starts it again");
      return;
    }
    const std::uint64_t now = process_manager::monotonic_ns();
    const process_manager::CrashPolicy::Decision d =
        pool->restarts.on_crash(0, now - pool->started_ns, now);
    if (d.give_up) {
      pool->state = Pool::State::Stopped;
      pool->exit_code = exit_code::kFailure;
      PM_LOG(LogLevel::Error,
             name + " stopped: its master " + process_manager::describe(c) + ", the " +
                 std::to_string(d.young_deaths) + "th time in a row within " +
                 process_manager::seconds_text(process_manager::ns(pool->restarts.settings().young),
                                               0) +
                 " of its start; a reload starts it again");
      return;
    }
    const auto pause = std::chrono::milliseconds((d.respawn_at_ns - now) / 1'000'000);
    pool->state = Pool::State::Waiting;
    pool->start_at = Clock::now() + pause;
    PM_LOG(LogLevel::Error,
           name + ": its master " + process_manager::describe(c) + "; starting it again" +
               (pause.count() ? " in " + std::to_string(pause.count()) + " ms" : ""));
  }

  void start_waiting_pools() {
    if (stopping_) return;
    for (Pool& p : pools_)
      if (p.state == Pool::State::Waiting && Clock::now() >= p.start_at) start(p);
  }

  // The exit code once nothing is left to run: 0 after a stop; with pools that all failed, the
  // last one's code (with one pool, the code a single application would exit with).
  std::optional<int> finished() const {
    bool alive = std::any_of(pools_.begin(), pools_.end(), [](const Pool& p) {
      return p.pid > 0 || p.state == Pool::State::Waiting || p.state == Pool::State::Restarting;
    });
    if (alive) return std::nullopt;
    if (stopping_) {
      PM_LOG(LogLevel::Notice, "fcgi-host stopped");
      return exit_code::kOk;
    }
    int code = exit_code::kFailure;
    for (const Pool& p : pools_)
      if (p.exit_code != exit_code::kOk) code = p.exit_code;
    PM_LOG(LogLevel::Alert, "no pool is left running; stopping, exit " + std::to_string(code));
    return code;
  }

  std::optional<std::vector<PoolSpec>> read_plans();
  void reload();
  EndpointReply reload_pool(const std::string& name);
  void apply(PoolSpec next, std::string& summary, bool force = false);
  void update_cgroup(Pool& pool);
  std::optional<PoolsHandover> take_handover();
  bool resume(Pool& pool, const PoolsHandover& handover);
  void resume_removed(const PoolsHandover& handover);
  bool adopt_successor(Pool& pool, pid_t old);
  void upgrade();
  EndpointReply answer_status(const StatusRequest& q);
  EndpointReply control(std::string_view verb, std::string_view args);

  SupervisorSpec spec_;
  process_manager::SignalPipe signals_;
  process_manager::Reaper reaper_;
  process_manager::SystemdNotifier notifier_;
  PoolCgroups cgroups_;
  std::unique_ptr<process_manager::Pidfile> pidfile_;
  std::vector<Pool> pools_; // a vector of a handful: found by name or pid
  bool stopping_ = false;
  std::unique_ptr<StatusServer> status_;
  std::string status_dir_;      // the pools' own status sockets
  std::string systemd_address_; // of the socket systemd passed on fd 3; empty: none

public:
  ~PoolMaster() {
    if (status_dir_.empty()) return;
    std::error_code ec;
    std::filesystem::remove_all(status_dir_, ec);
  }
};

// Every file read again and every pool checked; empty (and one line) when any is wrong.
std::optional<std::vector<PoolSpec>> PoolMaster::read_plans() {
  try {
    std::vector<PoolSpec> plans = spec_.read_pools();
    cgroups_.check(plans);
    return plans;
  } catch (const std::exception& e) {
    PM_LOG(LogLevel::Error,
           std::string("reload refused, every pool keeps running as it is: ") + e.what());
    return std::nullopt;
  }
}

void PoolMaster::reload() {
  notifier_.reloading();
  std::optional<std::vector<PoolSpec>> plans = read_plans();
  if (!plans) {
    notifier_.notify("READY=1");
    return;
  }
  std::string summary;
  for (Pool& p : pools_) {
    bool kept = std::any_of(plans->begin(), plans->end(),
                            [&p](const PoolSpec& n) { return n.name == p.plan.name; });
    if (kept || p.state == Pool::State::Removed) continue;
    summary += " [" + p.plan.name + "] removed;";
    p.state = Pool::State::Removed;
    if (p.pid > 0)
      ::kill(p.pid, SIGTERM);
    else
      cgroups_.remove(p.plan.name);
  }
  std::erase_if(pools_,
                [](const Pool& p) { return p.state == Pool::State::Removed && p.pid == 0; });
  for (PoolSpec& plan : *plans)
    apply(std::move(plan), summary);
  PM_LOG(LogLevel::Notice,
         "reload:" + (summary.empty() ? std::string(" nothing changed") : summary));
  notifier_.notify("READY=1");
}

// `fcgi-host reload NAME`: that pool reloads (a new generation) even when nothing changed; the
// others are left as they are.
EndpointReply PoolMaster::reload_pool(const std::string& name) {
  if (!find(name)) return plain_reply(404, "no pool [" + name + "]\n");
  std::optional<std::vector<PoolSpec>> plans = read_plans();
  if (!plans)
    return plain_reply(409, "reload refused: the configuration has an error (see the log)\n");
  for (PoolSpec& plan : *plans) {
    if (plan.name != name) continue;
    std::string summary;
    apply(std::move(plan), summary, true);
    PM_LOG(LogLevel::Notice, "reload of one pool:" + summary);
    return plain_reply(200, "reload:" + summary + "\n");
  }
  return plain_reply(409,
                     "pool [" + name + "] is no longer in the configuration: reload them all\n");
}

EndpointReply PoolMaster::answer_status(const StatusRequest& q) {
  if (q.path == "/ping") // 503 once the stop began, as a host's (status_page.hpp)
    return stopping_ ? plain_reply(503, "stopping\n")
                     : plain_reply(200, spec_.ping_response + "\n");
  app::Args args;
  args.parse(q.query);
  const std::string only(args.get("pool"));
  std::string forwarded;
  for (std::size_t i = 0; i < args.size(); ++i)
    if (args.at(i).name != "pool")
      forwarded += (forwarded.empty() ? "" : "&") + std::string(args.at(i).name) +
                   (args.at(i).value.empty() ? "" : "=" + std::string(args.at(i).value));
  std::vector<PoolPage> pages;
  for (const Pool& p : pools_) {
    if (!only.empty() && p.plan.name != only) continue;
    PoolPage page{p.plan.name, std::nullopt, "not running"};
    if (p.pid > 0) {
      try {
        page.reply = ask_host(p.status_address,
                              {"GET", std::string(q.path), forwarded, std::string(q.accept)},
                              std::chrono::milliseconds{200});
      } catch (const std::exception& e) {
        page.error = e.what();
      }
    }
    pages.push_back(std::move(page));
  }
  if (!only.empty() && pages.empty()) return plain_reply(404, "no pool [" + only + "]\n");
  return merge_pool_pages(pages);
}

EndpointReply PoolMaster::control(std::string_view verb, std::string_view text) {
  app::Args args;
  args.parse(text);
  const std::string name(args.get("pool"));
  if (verb == "reload") {
    if (!name.empty()) return reload_pool(name);
    reload();
    return plain_reply(200, "reloading every pool (the log lists what changed)\n");
  }
  if (verb != "scale") return plain_reply(404, "unknown control '" + std::string(verb) + "'\n");
  const Pool* pool = find(name);
  if (name.empty()) return plain_reply(400, "scale: name the pool (fcgi-host scale POOL N)\n");
  if (!pool || pool->pid <= 0) return plain_reply(404, "no running pool [" + name + "]\n");
  try {
    HostReply r =
        ask_host(pool->status_address,
                 {"POST", "/control/scale", "workers=" + std::string(args.get("workers")), ""},
                 std::chrono::milliseconds{1000});
    return plain_reply(r.status, "[" + name + "] " + r.body);
  } catch (const std::exception& e) {
    return plain_reply(502, "[" + name + "] did not answer: " + std::string(e.what()) + "\n");
  }
}

// One pool of the new configuration: started, reloaded, restarted or left alone.
void PoolMaster::apply(PoolSpec next, std::string& summary, bool force) {
  const std::string tag = " [" + next.name + "]";
  Pool* pool = find(next.name);
  if (!pool || pool->state == Pool::State::Removed) {
    summary += tag + " added;";
    Pool& added = pools_.emplace_back(std::move(next));
    update_cgroup(added);
    start(added);
    return;
  }
  const bool socket_changed = pool->plan.socket != next.socket;
  const bool changed = force || socket_changed || pool->plan.settings != next.settings;
  pool->plan = std::move(next);
  update_cgroup(*pool);
  pool->restarts = pool_restarts();
  if (pool->state == Pool::State::Stopped) {
    summary += tag + " started again;";
    pool->exit_code = exit_code::kOk;
    start(*pool);
  } else if (!changed) {
    summary += tag + " unchanged;";
  } else if (socket_changed && pool->pid > 0) {
    // The socket is bound once per master: a new address, owner or mode takes a new master.
    summary += tag + " restarts (its socket changed: " + pool->plan.socket + ");";
    pool->state = Pool::State::Restarting;
    ::kill(pool->pid, SIGTERM);
  } else if (pool->pid > 0) {
    summary += tag + " reloads;";
    ::kill(pool->pid, SIGHUP);
  }
}

// A reload: the pool's limits written again; a running master that was in no cgroup of its own
// moves into its new one (its workers from now on are born there). Checked before (check()), so
// a failure here is rare, and said.
void PoolMaster::update_cgroup(Pool& pool) {
  try {
    const std::string dir = cgroups_.apply(pool.plan);
    if (!dir.empty() && dir != pool.cgroup && pool.pid > 0) PoolCgroups::move(pool.pid, dir);
    pool.cgroup = dir;
  } catch (const std::exception& e) {
    PM_LOG(LogLevel::Error, "pool [" + pool.plan.name + "]: its cgroup limits cannot be applied: " +
                                e.what() + "; it runs without them");
  }
}

// USR2, in the old image: the new binary checks the configuration, then replaces this one in
// place (pools/upgrade.hpp); the new image goes on in run() with the handover.
void PoolMaster::upgrade() {
  const std::string refused = check_new_binary(spec_.executable, spec_.args, kUpgradeCheckTimeout);
  if (!refused.empty()) {
    PM_LOG(LogLevel::Error,
           "USR2: binary upgrade refused, every pool keeps running as it is: " + refused);
    return;
  }
  PoolsHandover handover{{}, status_dir_, cgroups_.base()};
  for (const Pool& p : pools_)
    if (p.pid > 0)
      handover.pools.push_back({p.plan.name, p.pid,
                                p.state == Pool::State::Removed      ? 'X'
                                : p.state == Pool::State::Restarting ? 'S'
                                                                     : 'R',
                                fingerprint(p.plan.socket)});
  PM_LOG(LogLevel::Notice, "USR2: binary upgrade: the new binary accepts the configuration; "
                           "running it in place of this one");
  notifier_.reloading();
  ExecFds fds;
  fds.pidfile = pidfile_ ? pidfile_->fd() : -1;
  if (status_) {
    fds.status = status_->fd();
    fds.status_file = status_->file().to_text();
  }
  fds.systemd_socket = !systemd_address_.empty();
  const std::string failed = exec_in_place(spec_.executable, spec_.args, handover, fds);
  PM_LOG(LogLevel::Error,
         "USR2: binary upgrade failed, every pool keeps running as it is: " + failed);
  notifier_.notify("READY=1");
}

std::optional<PoolsHandover> PoolMaster::take_handover() {
  const char* text = std::getenv(exec_env::kPoolsHandover);
  if (!text) return std::nullopt;
  std::optional<PoolsHandover> handover = PoolsHandover::from_text(text);
  ::unsetenv(exec_env::kPoolsHandover);
  if (!handover)
    PM_LOG(LogLevel::Error, std::string("binary upgrade: the handover is unreadable (") + text +
                                "); starting every pool afresh");
  return handover;
}

// The new image adopts a pool whose master ran under the old one, and has it upgrade itself.
bool PoolMaster::resume(Pool& pool, const PoolsHandover& handover) {
  auto it = std::find_if(handover.pools.begin(), handover.pools.end(),
                         [&](const PoolsHandover::Pool& p) { return p.name == pool.plan.name; });
  if (it == handover.pools.end() || it->state == 'X') return false;
  pool.pid = it->pid;
  pool.started_ns = process_manager::monotonic_ns();
  pool.state = it->state == 'S' ? Pool::State::Restarting : Pool::State::Running;
  set_status_address(pool);
  // Limits new with this configuration: its master moves in, and its new master is born there.
  if (!pool.cgroup.empty()) {
    try {
      PoolCgroups::move(pool.pid, pool.cgroup);
    } catch (const std::exception& e) {
      PM_LOG(LogLevel::Error, "pool [" + pool.plan.name + "]: " + e.what());
    }
  }
  if (pool.state == Pool::State::Running && it->socket != fingerprint(pool.plan.socket)) {
    // Its socket changed in the file meanwhile: a new master binds it (as a reload would).
    PM_LOG(LogLevel::Notice,
           "pool [" + pool.plan.name + "] restarts (its socket changed: " + pool.plan.socket + ")");
    pool.state = Pool::State::Restarting;
    ::kill(pool.pid, SIGTERM);
  } else if (pool.state == Pool::State::Running) {
    ::kill(pool.pid, SIGUSR2);
  }
  return true;
}

// Pools that were stopping for good under the old image, or are no longer in the
// configuration: they stop (and are reaped) under the new one.
void PoolMaster::resume_removed(const PoolsHandover& handover) {
  for (const PoolsHandover::Pool& p : handover.pools) {
    if (find(p.name) && p.state != 'X') continue;
    PoolSpec spec;
    spec.name = p.name;
    Pool& gone = pools_.emplace_back(std::move(spec));
    gone.pid = p.pid;
    gone.state = Pool::State::Removed;
    if (p.state != 'X') ::kill(p.pid, SIGTERM);
  }
}

// A pool's master exited 0: after its own USR2, its new master (its child) is now ours. The
// one child of ours that is no pool's master and runs `--pool NAME`.
bool PoolMaster::adopt_successor(Pool& pool, pid_t old) {
  const std::string marker = std::string("--pool") + '\0' + pool.plan.name + '\0';
  for (pid_t child : process_manager::children_of(getpid())) {
    if (find(child)) continue;
    const std::string cmdline =
        process_manager::read_text_file("/proc/" + std::to_string(child) + "/cmdline").value_or("");
    if (!cmdline.ends_with(marker)) continue;
    PM_LOG(LogLevel::Notice, "pool [" + pool.plan.name + "]: binary upgrade: its master " +
                                 std::to_string(child) + " took over from " + std::to_string(old));
    pool.pid = child;
    pool.started_ns = process_manager::monotonic_ns();
    set_status_address(pool);
    return true;
  }
  return false;
}

} // namespace

int run_pools(SupervisorSpec spec, std::vector<PoolSpec> pools) {
  PoolMaster master(std::move(spec));
  return master.run(std::move(pools));
}

} // namespace fcgi_host
