#include "fcgi_host/worker/output_capture.hpp"

#include "fcgi_host/net/fd_flags.hpp"
#include "process_manager/log.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/socket.h>
#include <system_error>
#include <unistd.h>

namespace fcgi_host {

namespace {

using process_manager::LogLevel;

constexpr int kReadsPerDrain = 64;
constexpr std::size_t kMaxLine = 4096;   // a longer line is logged in pieces
constexpr std::size_t kMaxWriters = 256; // unfinished lines kept at once

} // namespace

OutputCapture::OutputCapture() {
  int fds[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0)
    throw std::system_error(errno, std::generic_category(), "socketpair(worker output) failed");
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  int on = 1;
  setsockopt(read_fd_, SOL_SOCKET, SO_PASSCRED, &on, sizeof on);
  if (!set_nonblocking(read_fd_, true) || !set_nonblocking(write_fd_, true))
    throw std::system_error(errno, std::generic_category(), "fcntl(worker output) failed");
  shutdown(read_fd_, SHUT_WR); // one direction only
}

OutputCapture::~OutputCapture() {
  for (auto& [pid, text] : partial_)
    if (!text.empty()) line(pid, text);
  ::close(read_fd_);
  ::close(write_fd_);
}

void OutputCapture::line(pid_t pid, std::string_view text) {
  if (!text.empty() && text.back() == '\r') text.remove_suffix(1);
  PM_LOG(LogLevel::Notice, "worker " + std::to_string(pid) + ": " + std::string(text));
}

void OutputCapture::drain() {
  for (int i = 0; i < kReadsPerDrain; ++i) {
    char data[8192];
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(ucred))];
    iovec iov{data, sizeof data};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    ssize_t n = recvmsg(read_fd_, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n <= 0) return; // EAGAIN: all read
    pid_t pid = 0;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
        ucred cred;
        std::memcpy(&cred, CMSG_DATA(c), sizeof cred);
        pid = cred.pid;
      }
    if (partial_.size() >= kMaxWriters && !partial_.contains(pid)) {
      auto oldest = partial_.begin();
      line(oldest->first, oldest->second);
      partial_.erase(oldest);
    }
    std::string& buf = partial_[pid];
    buf.append(data, static_cast<std::size_t>(n));
    std::size_t start = 0;
    for (std::size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1)
      line(pid, std::string_view(buf).substr(start, nl - start));
    buf.erase(0, start);
    if (buf.size() >= kMaxLine) {
      line(pid, buf);
      buf.clear();
    }
    if (buf.empty()) partial_.erase(pid);
  }
}

void OutputCapture::forget(pid_t pid) {
  drain();
  auto it = partial_.find(pid);
  if (it == partial_.end()) return;
  if (!it->second.empty()) line(pid, it->second);
  partial_.erase(it);
}

void OutputCapture::attach(int write_fd) {
  if (write_fd < 0) return;
  auto& log = process_manager::Log::get();
  if (log.fd() == 2) {
    int copy = fcntl(2, F_DUPFD_CLOEXEC, 3);
    if (copy >= 0) log.keep_stderr(copy);
  }
  dup2(write_fd, 1);
  dup2(write_fd, 2);
  ::close(write_fd);
}

} // namespace fcgi_host
