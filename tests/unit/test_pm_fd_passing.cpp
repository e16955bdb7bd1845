// Descriptors passed over a Unix socket (process_manager/fd_passing.hpp): they arrive in order,
// close-on-exec, as the receiver's own; more than the receiver has room for are closed (never
// leaked) and the message says it was truncated; a plain message carries none.
#include "process_manager/fd_passing.hpp"

#include <array>
#include <doctest/doctest.h>
#include <fcntl.h>
#include <filesystem>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

using process_manager::receive_with_fds;
using process_manager::send_with_fds;

namespace {

std::size_t open_fd_count() {
  std::size_t n = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator("/proc/self/fd"))
    ++n;
  return n;
}

ino_t inode_of(int fd) {
  struct stat st {};
  REQUIRE(::fstat(fd, &st) == 0);
  return st.st_ino;
}

struct SocketPair {
  std::array<int, 2> fds{-1, -1};
  SocketPair() {
    REQUIRE(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, fds.data()) == 0);
  }
  ~SocketPair() {
    for (int fd : fds)
      if (fd >= 0) ::close(fd);
  }
};

} // namespace

TEST_CASE("fd passing: the descriptors arrive in order, close-on-exec, each the sender's file") {
  SocketPair pair;
  std::array<int, 2> pipe_fds{};
  REQUIRE(::pipe2(pipe_fds.data(), O_CLOEXEC) == 0);
  const char text[] = "two";
  const iovec part{const_cast<char*>(text), sizeof text};
  REQUIRE(send_with_fds(pair.fds[0], {&part, 1}, pipe_fds, 0));
  char data[8]{};
  std::array<int, 3> got{};
  const auto message = receive_with_fds(pair.fds[1], data, sizeof data, got, MSG_DONTWAIT);
  CHECK(message.length == static_cast<ssize_t>(sizeof text));
  CHECK(std::string(data) == "two");
  REQUIRE(message.fds == 2);
  CHECK_FALSE(message.truncated);
  CHECK(got[2] == -1);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(got[i] != pipe_fds[i]);
    CHECK(inode_of(got[i]) == inode_of(pipe_fds[i]));
    CHECK((::fcntl(got[i], F_GETFD) & FD_CLOEXEC) != 0);
    ::close(got[i]);
    ::close(pipe_fds[i]);
  }
}

TEST_CASE("fd passing: descriptors beyond the receiver's room are closed, the message truncated") {
  SocketPair pair;
  std::array<int, 3> sent{};
  for (int& fd : sent)
    fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const char byte = 'x';
  const iovec part{const_cast<char*>(&byte), 1};
  REQUIRE(send_with_fds(pair.fds[0], {&part, 1}, sent, 0));
  for (int fd : sent)
    ::close(fd);
  const std::size_t before = open_fd_count();
  char data = 0;
  int kept = -1;
  const auto message = receive_with_fds(pair.fds[1], &data, 1, {&kept, 1}, MSG_DONTWAIT);
  CHECK(message.length == 1);
  CHECK(message.fds == 1);
  CHECK(message.truncated);
  REQUIRE(kept >= 0);
  CHECK(open_fd_count() == before + 1); // the one kept; the other two closed
  ::close(kept);
}

TEST_CASE("fd passing: a plain message carries none, and more than the limit is refused") {
  SocketPair pair;
  const char byte = 'p';
  const iovec part{const_cast<char*>(&byte), 1};
  REQUIRE(send_with_fds(pair.fds[0], {&part, 1}, {}, 0));
  char data = 0;
  int fd = 7;
  const auto message = receive_with_fds(pair.fds[1], &data, 1, {&fd, 1}, MSG_DONTWAIT);
  CHECK(message.length == 1);
  CHECK(message.fds == 0);
  CHECK(fd == -1);
  std::array<int, process_manager::kMaxPassedFds + 1> too_many{};
  too_many.fill(0);
  CHECK_FALSE(send_with_fds(pair.fds[0], {&part, 1}, too_many, 0));
  CHECK(receive_with_fds(pair.fds[1], &data, 1, {&fd, 1}, MSG_DONTWAIT).length ==
        -1); // nothing sent
}
