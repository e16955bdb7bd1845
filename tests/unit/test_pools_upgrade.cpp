// What the master of the pools hands its new image at USR2 (fcgi_host/cli/pools_upgrade.hpp):
// the text round-trips, and a damaged one is refused whole rather than half read.
#include "fcgi_host/cli/pools_upgrade.hpp"

#include <doctest/doctest.h>

using fcgi_host::PoolsHandover;

TEST_CASE("the pools' handover text round-trips and refuses what it cannot read") {
  PoolsHandover h{{{"api", 4242, 'R'}, {"php-7_x", 17, 'S'}, {"old", 99, 'X'}},
                  "/tmp/fcgi-host-pools-abc",
                  "/sys/fs/cgroup/system.slice/fcgi-host.service"};
  const std::optional<std::string> text = h.to_text();
  REQUIRE(text);
  CHECK(*text == "status_dir=/tmp/fcgi-host-pools-abc;cgroup=/sys/fs/cgroup/system.slice/"
                 "fcgi-host.service;pool=api:4242:R;pool=php-7_x:17:S;pool=old:99:X");
  CHECK(PoolsHandover::from_text(*text) == h);
  const PoolsHandover empty{};
  CHECK(PoolsHandover::from_text(*empty.to_text()) == empty);
  CHECK_FALSE(PoolsHandover{{}, "/a;b", ""}.to_text());
  for (const char* bad : {"pool=api:x:R", "pool=api:12", "pool=:12:R", "pool=api:12:Q",
                          "pool=api:-3:R", "pool=api:0:R", "what=ever", "pool=api:12:RR"}) {
    CAPTURE(bad);
    CHECK_FALSE(PoolsHandover::from_text(bad));
  }
}
