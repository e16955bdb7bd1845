// What the master of the pools hands its new image at USR2 (fcgi_host/pools/upgrade.hpp):
// the text round-trips, and a damaged one is refused whole rather than half read.
#include "fcgi_host/pools/upgrade.hpp"

#include <doctest/doctest.h>

using fcgi_host::PoolsHandover;

TEST_CASE("the pools' handover text round-trips and refuses what it cannot read") {
  PoolsHandover h{{{"api", 4242, 'R', fcgi_host::fingerprint("unix:/run/api.sock")},
                   {"php-7_x", 17, 'S', "0123"},
                   {"old", 99, 'X', ""}},
                  "/tmp/fcgi-host-pools-abc",
                  "/sys/fs/cgroup/system.slice/fcgi-host.service"};
  const std::optional<std::string> text = h.to_text();
  REQUIRE(text);
  CHECK(*text == "status_dir=/tmp/fcgi-host-pools-abc;cgroup=/sys/fs/cgroup/system.slice/"
                 "fcgi-host.service;pool=api:4242:R:" +
                     fcgi_host::fingerprint("unix:/run/api.sock") +
                     ";pool=php-7_x:17:S:0123;pool=old:99:X:");
  CHECK(PoolsHandover::from_text(*text) == h);
  const PoolsHandover empty{};
  CHECK(PoolsHandover::from_text(*empty.to_text()) == empty);
  CHECK_FALSE(PoolsHandover{{}, "/a;b", ""}.to_text());
  for (const char* bad :
       {"pool=api:x:R:", "pool=api:12", "pool=api:12:R", "pool=:12:R:", "pool=api:12:Q:",
        "pool=api:-3:R:", "pool=api:0:R:", "what=ever", "pool=api:12:RR:", "pool=api:12:R:a:b"}) {
    CAPTURE(bad);
    CHECK_FALSE(PoolsHandover::from_text(bad));
  }
  // The fingerprint is FNV-1a: the same in every build, so an old and a new binary agree.
  CHECK(fcgi_host::fingerprint("") == "cbf29ce484222325");
  CHECK(fcgi_host::fingerprint("a") == "af63dc4c8601ec8c");
  CHECK(fcgi_host::fingerprint("unix:/a") != fcgi_host::fingerprint("unix:/b"));
}
