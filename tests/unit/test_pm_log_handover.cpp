// The log handover (process_manager/log_handover.hpp): what the master sends arrives by
// position, the last of several messages wins, a message not of the master's form is dropped
// with its descriptors, and the worker cannot write back.
#include "process_manager/log_handover.hpp"

#include <array>
#include <cerrno>
#include <cstring>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

using process_manager::HandedLogs;
using process_manager::LogHandover;

namespace {

ino_t inode(int fd) {
  struct stat st {};
  REQUIRE(::fstat(fd, &st) == 0);
  return st.st_ino;
}

// A pipe's two ends: two distinct open files to hand.
struct Pipe {
  std::array<int, 2> fds{-1, -1};
  Pipe() { REQUIRE(::pipe2(fds.data(), O_CLOEXEC) == 0); }
  ~Pipe() {
    for (int fd : fds)
      ::close(fd);
  }
};

} // namespace

TEST_CASE("log handover: descriptors arrive by position, the last message wins") {
  LogHandover h = LogHandover::make();
  REQUIRE(h.valid());
  Pipe first, second;
  CHECK(h.send(std::array{first.fds[0], -1}));
  CHECK(h.send(std::array{second.fds[0], second.fds[1]}));
  HandedLogs logs;
  REQUIRE(logs.receive(h.worker_fd()));
  int error_log = logs.take(0);
  int access_log = logs.take(1);
  REQUIRE(error_log >= 0);
  REQUIRE(access_log >= 0);
  CHECK(inode(error_log) == inode(second.fds[0]));
  CHECK(inode(access_log) == inode(second.fds[1]));
  CHECK((::fcntl(error_log, F_GETFD) & FD_CLOEXEC) != 0);
  CHECK(logs.take(1) == -1); // given away
  ::close(error_log);
  ::close(access_log);
  HandedLogs nothing;
  CHECK_FALSE(nothing.receive(h.worker_fd())); // all taken
}

TEST_CASE("log handover: a position without a file stays empty") {
  LogHandover h = LogHandover::make();
  Pipe p;
  CHECK(h.send(std::array{-1, p.fds[1]}));
  HandedLogs logs;
  REQUIRE(logs.receive(h.worker_fd()));
  CHECK(logs.take(0) == -1);
  int access_log = logs.take(1);
  CHECK(inode(access_log) == inode(p.fds[1]));
  ::close(access_log);
}

TEST_CASE("log handover: a message not of the master's form is dropped, the worker cannot write "
          "back") {
  LogHandover h = LogHandover::make();
  // The worker's end cannot send: the master's reading side is shut down.
  CHECK(::send(h.worker_fd(), "1", 1, MSG_DONTWAIT | MSG_NOSIGNAL) == -1);
  // A message claiming a file it does not carry: dropped whole.
  CHECK(::send(h.master_fd(), "1", 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1);
  HandedLogs logs;
  CHECK_FALSE(logs.receive(h.worker_fd()));
  CHECK(logs.take(0) == -1);
  // Too many positions.
  Pipe p;
  CHECK_FALSE(h.send(std::array{p.fds[0], p.fds[0], p.fds[0], p.fds[0], p.fds[0]}));
}
