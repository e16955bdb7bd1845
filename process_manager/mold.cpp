#include "process_manager/mold.hpp"

#include "process_manager/clock.hpp"
#include "process_manager/exit_codes.hpp"
#include "process_manager/fd_passing.hpp"
#include "process_manager/fork_clean.hpp"
#include "process_manager/signal_pipe.hpp"
#include "process_manager/spawner.hpp"

#include <cerrno>
#include <cstring>
#include <exception>
#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace process_manager {

namespace {

// Master -> mold: "a worker in this slot", with its log channel as SCM_RIGHTS when it has one.
struct ForkRequest {
  std::uint64_t slot;
};
// Mold -> master: the worker's pid, or -1 and the errno of the fork that failed.
struct ForkReply {
  std::int32_t pid;
  std::int32_t error;
};
// Mold -> master, once: 'R' (ready, the kept descriptor as SCM_RIGHTS when there is one) or
// 'E' followed by why.
constexpr char kReady = 'R';
constexpr char kFailed = 'E';

bool send_message(int channel, const void* data, std::size_t size, int pass_fd) {
  const iovec part{const_cast<void*>(data), size};
  return send_with_fds(channel, {&part, 1},
                       pass_fd >= 0 ? std::span<const int>(&pass_fd, 1) : std::span<const int>{},
                       0);
}

// One message into `data` (at most `size` bytes): its length, 0 when the peer is gone, -1 on
// an error or when `timeout` passed (-1: none; 0: none waiting now, EAGAIN). A descriptor that
// came with it goes to `*received` (closed when `received` is null).
ssize_t receive_message(int channel, void* data, std::size_t size, int* received,
                        std::chrono::milliseconds timeout) {
  if (received) *received = -1;
  const std::uint64_t deadline = monotonic_ns() + ns(timeout);
  for (;;) {
    if (timeout.count() > 0) {
      const std::uint64_t now = monotonic_ns();
      if (now >= deadline) return errno = ETIMEDOUT, -1;
      pollfd p{channel, POLLIN, 0};
      const int r = ::poll(&p, 1, static_cast<int>((deadline - now) / 1'000'000 + 1));
      if (r < 0 && errno != EINTR) return -1;
      if (r <= 0) continue;
    }
    int fd = -1;
    const ReceivedMessage got =
        receive_with_fds(channel, data, size, {&fd, 1}, timeout.count() == 0 ? MSG_DONTWAIT : 0);
    if (fd >= 0 && received)
      *received = fd;
    else if (fd >= 0)
      ::close(fd);
    return got.length;
  }
}

bool read_all(int fd, void* data, std::size_t size) {
  auto* p = static_cast<char*>(data);
  for (std::size_t done = 0; done < size;) {
    const ssize_t n = ::read(fd, p + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// Forks twice (fork_clean, the house's one fork, both times: the mold's signals are all blocked
// already, and the worker gets the master's mask back in run_child): the grandchild runs
// `become` once its middle parent is gone, that is once it is the master's child (the
// subreaper's), so that its death signal and its parent are the master's. Returns the
// grandchild's pid, or -1 with errno.
pid_t fork_reparented(const char* name, const std::function<void()>& become) {
  int pid_pipe[2], go_pipe[2];
  if (::pipe2(pid_pipe, O_CLOEXEC) != 0) return -1;
  if (::pipe2(go_pipe, O_CLOEXEC) != 0) {
    const int err = errno;
    ::close(pid_pipe[0]), ::close(pid_pipe[1]);
    return errno = err, -1;
  }
  const pid_t middle = fork_clean([&](const sigset_t&) {
    ::close(pid_pipe[0]);
    ::close(go_pipe[1]);
    const pid_t grandchild = fork_clean([&](const sigset_t&) {
      ::prctl(PR_SET_NAME, name); // a worker, not a mold, from its first moment in the master's
      ::close(pid_pipe[1]);
      char go = 0; // the middle parent has been reaped: this process is the master's now
      if (!read_all(go_pipe[0], &go, 1)) _exit(exit_code::kWorkerError);
      ::close(go_pipe[0]);
      become();
    });
    std::int32_t reply[2] = {grandchild, errno};
    ssize_t ignored = ::write(pid_pipe[1], reply, sizeof reply);
    (void)ignored;
    _exit(0);
  });
  const int fork_errno = errno;
  ::close(pid_pipe[1]);
  ::close(go_pipe[0]);
  std::int32_t reply[2] = {-1, fork_errno};
  if (middle > 0) {
    if (!read_all(pid_pipe[0], reply, sizeof reply)) reply[0] = -1, reply[1] = ECHILD;
    while (::waitpid(middle, nullptr, 0) < 0 && errno == EINTR) {}
  }
  ::close(pid_pipe[0]);
  if (reply[0] > 0) {
    const char go = 1;
    ssize_t ignored = ::write(go_pipe[1], &go, 1);
    (void)ignored;
  }
  ::close(go_pipe[1]);
  if (reply[0] <= 0) return errno = reply[1], -1;
  return reply[0];
}

// The mold's loop: a worker for each request, until the master closes the channel (or dies).
[[noreturn]] void serve_requests(int channel, pid_t master, const sigset_t& mask,
                                 std::uint32_t generation, Spawner& spawner,
                                 const std::function<int(const WorkerContext&)>& worker_main,
                                 const char* worker_name) {
  for (;;) {
    ForkRequest request{};
    int log_channel = -1;
    const ssize_t n = receive_message(channel, &request, sizeof request, &log_channel,
                                      std::chrono::milliseconds{-1});
    if (n == 0 || (n < 0 && errno != EINTR)) _exit(exit_code::kWorkerDone);
    if (n != static_cast<ssize_t>(sizeof request)) {
      if (log_channel >= 0) ::close(log_channel);
      continue;
    }
    const pid_t pid = fork_reparented(worker_name, [&] {
      ::close(channel); // the master's word is the master's: no worker may speak for the mold
      spawner.run_child(master, mask, static_cast<std::size_t>(request.slot), generation,
                        worker_main, {}, log_channel, true);
    });
    const ForkReply reply{pid, pid < 0 ? errno : 0};
    if (log_channel >= 0) ::close(log_channel);
    if (!send_message(channel, &reply, sizeof reply, -1)) _exit(exit_code::kWorkerDone);
  }
}

[[noreturn]] void run_mold(int channel, pid_t master, const sigset_t& mask,
                           std::uint32_t generation, const MoldPlan& plan, Spawner& spawner,
                           const std::function<int(const WorkerContext&)>& worker_main,
                           std::span<const int> close_fds) {
  char worker_name[16] = {};
  ::prctl(PR_GET_NAME, worker_name);
  ::prctl(PR_SET_NAME, kMoldProcessName);
  spawner.close_master_fds(close_fds);
  if (::prctl(PR_SET_PDEATHSIG, SIGKILL) == -1 || ::getppid() != master)
    _exit(exit_code::kWorkerError);
  // Its signals stay blocked (fork_clean): the master stops it with SIGKILL or by closing the
  // channel, and the workers it forks get the master's mask back (run_child).
  MoldBoot boot;
  try {
    boot = plan.boot(plan.kept->fd);
  } catch (const std::exception& e) {
    boot.error = e.what();
  } catch (...) {
    boot.error = "the mold's boot threw an exception of unknown type";
  }
  if (plan.kept->fd >= 0) ::close(plan.kept->fd);
  if (!boot.error.empty()) {
    const std::string message = kFailed + boot.error.substr(0, 4000);
    send_message(channel, message.data(), message.size(), -1);
    _exit(exit_code::kWorkerBootFailure);
  }
  if (!send_message(channel, &kReady, 1, boot.keep_fd)) _exit(exit_code::kWorkerError);
  if (boot.keep_fd >= 0) ::close(boot.keep_fd); // the loaded code stays mapped
  serve_requests(channel, master, mask, generation, spawner, worker_main, worker_name);
}

} // namespace

MoldPlan::Kept::~Kept() {
  if (fd >= 0) ::close(fd);
}

Mold::Mold(pid_t pid, int channel, std::uint32_t generation, std::shared_ptr<MoldPlan::Kept> kept)
    : pid_(pid), channel_(channel), generation_(generation), started_at_ns_(monotonic_ns()),
      kept_(std::move(kept)) {}

Mold::~Mold() {
  ::close(channel_);
  if (pid_ > 0) ::kill(pid_, SIGKILL); // the master reaps it as every child (reap())
}

std::unique_ptr<Mold> Mold::start(std::uint32_t generation, const MoldPlan& plan, Spawner& spawner,
                                  const std::function<int(const WorkerContext&)>& worker_main,
                                  std::span<const int> close_fds, std::string& why) {
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    why = std::string("socketpair() for the mold failed: ") + std::strerror(errno);
    return nullptr;
  }
  const pid_t master = ::getpid();
  const pid_t pid = fork_clean([&](const sigset_t& mask) {
    ::close(pair[0]);
    run_mold(pair[1], master, mask, generation, plan, spawner, worker_main, close_fds);
  });
  const int fork_errno = errno;
  ::close(pair[1]);
  if (pid < 0) {
    ::close(pair[0]);
    why = std::string("fork() of the mold failed: ") + std::strerror(fork_errno);
    return nullptr;
  }
  return std::unique_ptr<Mold>(new Mold(pid, pair[0], generation, plan.kept));
}

Mold::Boot Mold::read_boot(std::string& why) {
  if (booted_) return Boot::Ready;
  char message[4096];
  int kept = -1;
  const ssize_t n =
      receive_message(channel_, message, sizeof message, &kept, std::chrono::milliseconds{0});
  if (n > 0 && message[0] == kReady) {
    if (kept >= 0 && kept_->fd < 0)
      kept_->fd = kept;
    else if (kept >= 0)
      ::close(kept);
    booted_ = true;
    return Boot::Ready;
  }
  if (kept >= 0) ::close(kept);
  if (n > 1 && message[0] == kFailed) {
    why = std::string(message + 1, static_cast<std::size_t>(n - 1));
    return Boot::Failed;
  }
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
    if (monotonic_ns() - started_at_ns_ < ns(kMoldBootTimeout)) return Boot::Pending;
    why = "its boot took longer than " + std::to_string(kMoldBootTimeout.count() / 1000) + " s";
    return Boot::Failed;
  }
  why = "it died while booting";
  return Boot::Failed;
}

pid_t Mold::fork_worker(std::size_t slot, int log_channel, std::string& why) {
  const ForkRequest request{slot};
  if (!send_message(channel_, &request, sizeof request, log_channel)) {
    why = std::string("the mold does not take requests: ") + std::strerror(errno);
    return -1;
  }
  ForkReply reply{-1, 0};
  const ssize_t n = receive_message(channel_, &reply, sizeof reply, nullptr, kMoldForkTimeout);
  if (n != static_cast<ssize_t>(sizeof reply)) {
    why = n < 0 && errno == ETIMEDOUT ? "the mold did not answer within " +
                                            std::to_string(kMoldForkTimeout.count() / 1000) + " s"
                                      : "the mold is gone";
    return -1;
  }
  if (reply.pid <= 0) {
    why = std::string("fork() in the mold failed: ") + std::strerror(reply.error);
    return -1;
  }
  return reply.pid;
}

} // namespace process_manager
