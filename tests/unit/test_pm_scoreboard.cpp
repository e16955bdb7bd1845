#include "process_manager/scoreboard.hpp"

#include <cstring>
#include <doctest/doctest.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

using namespace process_manager;

TEST_CASE("scoreboard: slots start free") {
  Scoreboard sb(4);
  CHECK(sb.capacity() == 4);
  for (std::size_t i = 0; i < 4; ++i) {
    CHECK(sb.slot(i).state == WorkerState::Free);
    CHECK(sb.slot(i).pid == 0);
  }
}

TEST_CASE("scoreboard: request round trip, sequence even afterwards") {
  Scoreboard sb(1);
  WorkerSlot& s = sb.slot(0);
  Scoreboard::set_request(s, "GET", 3, "/hello?x=1", 10);
  Scoreboard::RequestInfo r = Scoreboard::read_request(s);
  CHECK(std::string(r.method) == "GET");
  CHECK(std::string(r.uri) == "/hello?x=1");
  CHECK(s.request_seq % 2 == 0);
  Scoreboard::set_request(s, "POST", 4, "/a", 2);
  r = Scoreboard::read_request(s);
  CHECK(std::string(r.method) == "POST");
  CHECK(std::string(r.uri) == "/a");
}

TEST_CASE("scoreboard: long method and uri are truncated and terminated") {
  Scoreboard sb(1);
  std::string method(40, 'M'), uri(1000, 'u');
  Scoreboard::set_request(sb.slot(0), method.data(), method.size(), uri.data(), uri.size());
  Scoreboard::RequestInfo r = Scoreboard::read_request(sb.slot(0));
  CHECK(std::strlen(r.method) == kSlotMethodSize - 1);
  CHECK(std::strlen(r.uri) == kSlotUriSize - 1);
}

TEST_CASE("scoreboard: a reader never hangs on a writer killed mid-write") {
  Scoreboard sb(1);
  sb.slot(0).request_seq = 7; // odd forever
  Scoreboard::RequestInfo r = Scoreboard::read_request(sb.slot(0));
  CHECK(r.uri[kSlotUriSize - 1] == '\0');
}

TEST_CASE("scoreboard: shared with a forked child") {
  Scoreboard sb(2);
  pid_t pid = fork();
  REQUIRE(pid != -1);
  if (pid == 0) {
    sb.slot(1).state = WorkerState::Idle;
    Scoreboard::set_request(sb.slot(1), "PUT", 3, "/child", 6);
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  CHECK(sb.slot(1).state == WorkerState::Idle);
  CHECK(std::string(Scoreboard::read_request(sb.slot(1)).uri) == "/child");
}
