#include "process_manager/scoreboard.hpp"

#include <csignal>
#include <cstdint>
#include <cstring>
#include <doctest/doctest.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

using namespace process_manager;

TEST_CASE("scoreboard: slots start free") {
  Scoreboard sb(4); // zero-filled pages: nothing constructed, every slot free
  CHECK(sb.capacity() == 4);
  CHECK(sb.used() == 0);
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(sb.slot(i).state == WorkerState::Free);
    CHECK(sb.slot(i).pid == 0);
  }
}

TEST_CASE("scoreboard: request round trip, sequence even afterwards") {
  Scoreboard sb(1);
  sb.prepare(0, 1);
  WorkerSlot& s = sb.slot(0);
  Scoreboard::set_request(s.request(0), "GET", 3, "/hello?x=1", 10);
  Scoreboard::RequestInfo r = Scoreboard::read_request(s);
  CHECK(std::string(r.method) == "GET");
  CHECK(std::string(r.uri) == "/hello?x=1");
  CHECK(s.request(0).request_seq % 2 == 0);
  Scoreboard::set_request(s.request(0), "POST", 4, "/a", 2);
  r = Scoreboard::read_request(s);
  CHECK(std::string(r.method) == "POST");
  CHECK(std::string(r.uri) == "/a");
}

TEST_CASE("scoreboard: long method and uri are truncated and terminated") {
  Scoreboard sb(1);
  sb.prepare(0, 1);
  std::string method(40, 'M'), uri(1000, 'u');
  Scoreboard::set_request(sb.slot(0).request(0), method.data(), method.size(), uri.data(),
                          uri.size());
  Scoreboard::RequestInfo r = Scoreboard::read_request(sb.slot(0));
  CHECK(std::strlen(r.method) == kSlotMethodSize - 1);
  CHECK(std::strlen(r.uri) == kSlotUriSize - 1);
}

TEST_CASE("scoreboard: a reader never hangs on a writer killed mid-write") {
  Scoreboard sb(1);
  sb.prepare(0, 1);
  sb.slot(0).request(0).request_seq = 7; // odd forever
  Scoreboard::RequestInfo r = Scoreboard::read_request(sb.slot(0));
  CHECK(r.uri[kSlotUriSize - 1] == '\0');
}

TEST_CASE("scoreboard: shared with a forked child") {
  Scoreboard sb(2);
  for (std::size_t i = 0; i < 2; ++i)
    sb.prepare(i, 1);
  pid_t pid = fork();
  REQUIRE(pid != -1);
  if (pid == 0) {
    sb.slot(1).state = WorkerState::Idle;
    Scoreboard::set_request(sb.slot(1).request(0), "PUT", 3, "/child", 6);
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(sb.slot(1).state == WorkerState::Idle);
  CHECK(std::string(Scoreboard::read_request(sb.slot(1)).uri) == "/child");
}

TEST_CASE("scoreboard: each worker's region is its own pages, a worker cannot write another's") {
  Scoreboard sb(3, 4);
  for (std::size_t i = 0; i < 3; ++i)
    sb.prepare(i, 4);
  CHECK(sb.used() == 3);
  const long page = sysconf(_SC_PAGESIZE);
  auto at = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p); };
  CHECK(at(&sb.slot(0)) % page == 0);
  CHECK(at(&sb.slot(1)) % page == 0);
  CHECK(at(&sb.slot(1).request(3)) + sizeof(RequestSlot) <= at(&sb.slot(2)));
  pid_t child = fork();
  if (child == 0) {
    // The fault ends the child with a code of its own (not the test framework's crash report).
    struct sigaction fault {};
    fault.sa_handler = [](int) { _exit(42); };
    sigaction(SIGSEGV, &fault, nullptr);
    if (!sb.protect_others(1)) _exit(3);
    sb.slot(1).requests = 5;                  // its own: fine
    sb.slot(1).request(3).queue_ns = 1;       // its own thread slots too
    if (sb.slot(0).pid.load() != 0) _exit(4); // the others can be read
    sb.slot(2).pid = 4242;                    // another's: a fault
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 42); // the write to another's region faulted
  CHECK(sb.slot(1).requests == 5);
  CHECK(sb.slot(2).pid == 0);
  sb.slot(2).pid = 1; // the master still writes every region
  CHECK(sb.slot(2).pid == 1);
}

TEST_CASE("scoreboard: busy threads count each thread's state, with one thread, the worker's") {
  Scoreboard sb(1, 4);
  sb.prepare(0, 1);
  WorkerSlot& s = sb.slot(0);
  s.state = WorkerState::Handling;
  CHECK(busy_threads(s) == 1);
  s.state = WorkerState::Idle;
  CHECK(busy_threads(s) == 0);
  sb.prepare(0, 4);
  CHECK(s.thread_count() == 4);
  s.request(1).state = WorkerState::Handling;
  s.request(3).state = WorkerState::Writing;
  CHECK(busy_threads(s) == 2);
  sb.prepare(0, 9); // at most the scoreboard's threads
  CHECK(s.thread_count() == 4);
}
