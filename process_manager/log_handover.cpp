#include "process_manager/log_handover.hpp"

#include "process_manager/fd_passing.hpp"

#include <cerrno>
#include <sys/socket.h>
#include <unistd.h>
#include <utility>

namespace process_manager {

namespace {

// A message: one byte per position ('1': a descriptor is there, '0': none), then the
// descriptors of the '1' positions in order, as SCM_RIGHTS.
constexpr char kPresent = '1';
constexpr char kAbsent = '0';

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

} // namespace

LogHandover::LogHandover(LogHandover&& other) noexcept
    : master_fd_(std::exchange(other.master_fd_, -1)),
      worker_fd_(std::exchange(other.worker_fd_, -1)) {}

LogHandover& LogHandover::operator=(LogHandover&& other) noexcept {
  if (this != &other) {
    close();
    master_fd_ = std::exchange(other.master_fd_, -1);
    worker_fd_ = std::exchange(other.worker_fd_, -1);
  }
  return *this;
}

LogHandover LogHandover::make() {
  LogHandover h;
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0, pair) != 0) return h;
  // One way: the master never reads, so a worker cannot queue anything at the master's end
  // (its writes fail with EPIPE).
  ::shutdown(pair[0], SHUT_RD);
  h.master_fd_ = pair[0];
  h.worker_fd_ = pair[1];
  return h;
}

void LogHandover::close_worker_end() {
  close_fd(worker_fd_);
}

void LogHandover::close() {
  close_fd(master_fd_);
  close_fd(worker_fd_);
}

static_assert(kMaxHandedLogs <= kMaxPassedFds, "the logs a worker takes fit in one message");

bool LogHandover::send(std::span<const int> fds) const {
  if (master_fd_ < 0 || fds.empty() || fds.size() > kMaxHandedLogs) return false;
  std::array<char, kMaxHandedLogs> positions{};
  std::array<int, kMaxHandedLogs> present{};
  std::size_t count = 0;
  for (std::size_t i = 0; i < fds.size(); ++i) {
    positions[i] = fds[i] >= 0 ? kPresent : kAbsent;
    if (fds[i] >= 0) present[count++] = fds[i];
  }
  const iovec part{positions.data(), fds.size()};
  return send_with_fds(master_fd_, {&part, 1}, {present.data(), count}, MSG_DONTWAIT);
}

HandedLogs::~HandedLogs() {
  clear();
}

void HandedLogs::clear() {
  for (int& fd : fds_)
    close_fd(fd);
}

bool HandedLogs::receive(int channel) {
  bool got = false;
  for (;;) {
    std::array<char, kMaxHandedLogs + 1> positions{}; // one more: a longer message is refused
    std::array<int, kMaxHandedLogs> received;
    const ReceivedMessage got_message =
        receive_with_fds(channel, positions.data(), positions.size(), received, MSG_DONTWAIT);
    const ssize_t n = got_message.length;
    if (n <= 0) {
      for (int& fd : received)
        close_fd(fd);
      return got;
    }
    const std::size_t count = got_message.fds;
    auto length = static_cast<std::size_t>(n);
    std::size_t wanted = 0;
    bool well_formed = length <= kMaxHandedLogs && !got_message.truncated;
    for (std::size_t i = 0; well_formed && i < length; ++i) {
      if (positions[i] == kPresent)
        ++wanted;
      else if (positions[i] != kAbsent)
        well_formed = false;
    }
    if (!well_formed || wanted != count) { // not the master's: nothing of it is used
      for (int& fd : received)
        close_fd(fd);
      continue;
    }
    clear(); // a later rotation supersedes an earlier one
    std::size_t next = 0;
    for (std::size_t i = 0; i < length; ++i)
      if (positions[i] == kPresent) fds_[i] = received[next++];
    got = true;
  }
}

int HandedLogs::take(std::size_t position) {
  if (position >= fds_.size()) return -1;
  return std::exchange(fds_[position], -1);
}

} // namespace process_manager
