// The worker's table of connections (fcgi_host/worker/connection_table.hpp): its sweeps visit
// every connection held, in the order of their fds, however the range they run over narrows.
#include "fcgi_host/worker/connection_table.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <unistd.h>
#include <vector>

using fcgi_host::Connection;
using fcgi_host::ConnectionTable;

namespace {

// Real fds (the table closes those it still holds when it goes), opened on /dev/null.
struct Fds {
  std::vector<int> fds;
  explicit Fds(int n) {
    for (int i = 0; i < n; ++i)
      fds.push_back(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  }
};

std::vector<int> swept(ConnectionTable& table) {
  std::vector<int> seen;
  table.for_each([&](Connection& c) { seen.push_back(c.fd); });
  return seen;
}

// Forgets the connection on `fd` and closes it, as the worker does.
void drop(ConnectionTable& table, int fd) {
  Connection* c = table.find(fd);
  REQUIRE(c != nullptr);
  table.remove(*c);
  ::close(fd);
}

struct Table {
  fcgi_host::RequestLimits limits;
  fcgi_host::ServerValues values;
  ConnectionTable table{limits, values};
  // Adds every fd of `f`, lowest first.
  void hold(const Fds& f) {
    for (int fd : f.fds) {
      REQUIRE(fd >= 0);
      table.add(fd, 0);
    }
  }
};

} // namespace

TEST_CASE("connection table: a sweep visits the connections held, lowest fd first") {
  Table t;
  Fds f(4);
  for (int fd : f.fds)
    REQUIRE(fd >= 0);
  // Added out of order: the sweep still goes by fd.
  t.table.add(f.fds[2], 0);
  t.table.add(f.fds[0], 0);
  t.table.add(f.fds[3], 0);
  t.table.add(f.fds[1], 0);
  CHECK(swept(t.table) == f.fds);
  CHECK(t.table.open() == 4);
}

TEST_CASE("connection table: removing the lowest and the highest fd narrows the sweep, and "
          "nothing held is skipped") {
  Table t;
  Fds f(4);
  t.hold(f);
  drop(t.table, f.fds[0]);
  CHECK(swept(t.table) == std::vector<int>{f.fds[1], f.fds[2], f.fds[3]});
  drop(t.table, f.fds[3]);
  CHECK(swept(t.table) == std::vector<int>{f.fds[1], f.fds[2]});
  drop(t.table, f.fds[1]);
  drop(t.table, f.fds[2]);
  CHECK(swept(t.table).empty());
  CHECK(t.table.open() == 0);
  // Empty, then one again (a connection per request): the sweep finds it.
  Fds again(1);
  t.table.add(again.fds[0], 0);
  CHECK(swept(t.table) == again.fds);
}

TEST_CASE("connection table: a sweep that removes the connection it is given still visits "
          "every other one once") {
  Table t;
  Fds f(5);
  t.hold(f);
  std::vector<int> seen;
  // Drops the lowest, the highest and one between, as deadlines passing at once would.
  t.table.for_each([&](Connection& c) {
    seen.push_back(c.fd);
    if (c.fd == f.fds[0] || c.fd == f.fds[2] || c.fd == f.fds[4]) {
      int fd = c.fd;
      t.table.remove(c);
      ::close(fd);
    }
  });
  CHECK(seen == f.fds);
  CHECK(swept(t.table) == std::vector<int>{f.fds[1], f.fds[3]});
}
