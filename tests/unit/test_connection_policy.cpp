// The worker's deadline and eviction rules (fcgi_host/worker/connection_policy.hpp), without a
// socket: times are numbers, connections are their byte counts and phases.
#include "fcgi_host/worker/connection_policy.hpp"
#include "support/nanoseconds.hpp"

#include <doctest/doctest.h>

using namespace fcgi_host;
using namespace std::chrono_literals;
using Phase = Connection::Phase;

namespace {
using test_support::kMs;
using test_support::kS;
using test_support::kT0;

Limits limits() {
  Limits l;
  l.header_timeout = 10s;
  l.body_timeout = 20s;
  l.body_min_rate = 1000; // bytes that buy one more second of body
  l.keepalive_timeout = 60s;
  l.write_timeout = 30s;
  l.max_connections = 3;
  l.max_buffered = 1000;
  return l;
}
} // namespace

TEST_CASE("connection policy: a kept connection rests --keepalive-timeout, a stopping one 100 ms") {
  ConnectionPolicy p(limits());
  CHECK(p.next_request_deadline(kT0, false) == kT0 + 60 * kS);
  CHECK(p.next_request_deadline(kT0, true) == kT0 + kStopIdleNs);
  CHECK(kStopIdleNs == 100 * kMs);
}

TEST_CASE("connection policy: the head has one total deadline from the first wait") {
  ConnectionPolicy p(limits());
  CHECK(p.head_deadline(kT0) == kT0 + 10 * kS);
}

TEST_CASE("connection policy: the body's total grows only with the bytes that arrived") {
  ConnectionPolicy p(limits());
  // Nothing arrived yet: the total (timeout + 0 earned) is sooner than a full pause from now.
  CHECK(p.body_deadline(kT0 + 5 * kS, kT0, 0) == kT0 + 20 * kS);
  // 3000 bytes earned 3 s more: still the total, as a pause from now would end later.
  CHECK(p.body_deadline(kT0 + 5 * kS, kT0, 3000) == kT0 + 23 * kS);
  // A large steady upload earned plenty: at most --body-timeout from now, between two reads.
  CHECK(p.body_deadline(kT0 + 5 * kS, kT0, 1'000'000) == kT0 + 25 * kS);
  // A trickle cannot stretch it: one byte a second for a minute earns 60 ms.
  CHECK(p.body_deadline(kT0 + 60 * kS, kT0, 60) == kT0 + 20 * kS + 60 * kMs);
}

TEST_CASE("connection policy: without --body-min-rate the body's total is twice --body-timeout") {
  Limits l = limits();
  l.body_min_rate = 0;
  ConnectionPolicy p(l);
  CHECK(p.body_deadline(kT0, kT0, 0) == kT0 + 20 * kS);
  CHECK(p.body_deadline(kT0 + 30 * kS, kT0, 5) == kT0 + 40 * kS);
}

TEST_CASE("connection policy: a buffered response's deadline counts from the request's start") {
  ConnectionPolicy p(limits());
  CHECK(p.write_deadline(kT0) == kT0 + 30 * kS);
  CHECK(p.write_timeout_ns() == 30 * kS);
}

TEST_CASE("connection policy: at a stop, a resting connection waits no longer than 100 ms") {
  CHECK(ConnectionPolicy::stop_idle_deadline(kT0, kT0 + 60 * kS) == kT0 + kStopIdleNs);
  CHECK(ConnectionPolicy::stop_idle_deadline(kT0, kT0 + 5 * kMs) == kT0 + 5 * kMs); // sooner stays
}

TEST_CASE("connection policy: what a passed deadline means, phase by phase") {
  using P = ConnectionPolicy;
  // Between requests on a kept connection: closed quietly, or released by a stopping worker.
  CHECK(P::on_deadline(Phase::KeptIdle, true, false, false) == Expiry::CloseIdle);
  CHECK(P::on_deadline(Phase::KeptIdle, true, false, true) == Expiry::ReleaseStopping);
  // Part of the next request arrived on it: that request's deadline.
  CHECK(P::on_deadline(Phase::KeptIdle, false, false, false) == Expiry::HeadTimeout);
  CHECK(P::on_deadline(Phase::KeptIdle, false, true, true) == Expiry::BodyTimeout);
  CHECK(P::on_deadline(Phase::Reading, false, false, false) == Expiry::HeadTimeout);
  CHECK(P::on_deadline(Phase::Reading, false, true, false) == Expiry::BodyTimeout);
  CHECK(P::on_deadline(Phase::Writing, false, true, false) == Expiry::WriteTimeout);
  CHECK(P::on_deadline(Phase::Draining, false, false, true) == Expiry::DrainOver);
}

TEST_CASE("connection policy: only a client's fault is logged, naming the option") {
  using P = ConnectionPolicy;
  CHECK(P::reason(Expiry::CloseIdle) == nullptr);
  CHECK(P::reason(Expiry::ReleaseStopping) == nullptr);
  CHECK(P::reason(Expiry::DrainOver) == nullptr);
  CHECK(std::string(P::reason(Expiry::HeadTimeout)).find("--header-timeout") != std::string::npos);
  CHECK(std::string(P::reason(Expiry::BodyTimeout)).find("--body-timeout") != std::string::npos);
  CHECK(std::string(P::reason(Expiry::WriteTimeout)).find("--write-timeout") != std::string::npos);
}

TEST_CASE("connection policy: pressure is a full table first, then too many bytes held") {
  ConnectionPolicy p(limits());
  CHECK(p.pressure(2, 1000) == Pressure::None);
  CHECK(p.pressure(2, 1001) == Pressure::Buffered);
  CHECK(p.pressure(3, 0) == Pressure::Connections);
  CHECK(p.pressure(3, 5000) == Pressure::Connections);
  CHECK_FALSE(p.full(2));
  CHECK(p.full(3));
  CHECK(ConnectionPolicy::reason(Pressure::None) == nullptr);
  CHECK(std::string(ConnectionPolicy::reason(Pressure::Connections)).find("--max-connections") !=
        std::string::npos);
  CHECK(std::string(ConnectionPolicy::reason(Pressure::Buffered)).find("--max-buffered") !=
        std::string::npos);
}

TEST_CASE("eviction: the connection with the least progress per time alive is chosen") {
  EvictionScan scan(kT0 + 10 * kS);
  scan.consider(5, 10'000, kT0, 100, true);        // 1000 bytes/s
  scan.consider(6, 500, kT0 + 9 * kS, 200, true);  // young, 500 bytes/s
  scan.consider(7, 2000, kT0 + 8 * kS, 300, true); // 1000 bytes/s
  CHECK(scan.victim_fd() == 6);
  CHECK(scan.buffered_bytes() == 600);
}

TEST_CASE("eviction: an idle kept connection goes before one that brings a request") {
  EvictionScan scan(kT0 + 10 * kS);
  scan.consider(5, 50'000, kT0 + 9 * kS, 0, true); // mid-request, bytes flowing
  scan.consider(8, 1, kT0, 0, true);               // kept, idle for 10 s (taken over: 1 byte)
  CHECK(scan.victim_fd() == 8);
}

TEST_CASE("eviction: a response being written or a running request is never chosen") {
  EvictionScan scan(kT0 + 10 * kS);
  scan.consider(5, 0, kT0, 4000, false); // writing: its memory counts, it stays
  scan.consider(6, 0, kT0, 10, false);   // its request runs
  CHECK(scan.victim_fd() == -1);
  CHECK(scan.buffered_bytes() == 4010);
  scan.consider(7, 100'000, kT0, 10, true);
  CHECK(scan.victim_fd() == 7);
}

TEST_CASE("eviction: of equal progress, the first one considered goes") {
  EvictionScan scan(kT0 + 10 * kS);
  scan.consider(9, 0, kT0 + 5 * kS, 0, true);
  scan.consider(4, 0, kT0, 0, true);
  CHECK(scan.victim_fd() == 9);
}

TEST_CASE("connection policy: the wait's timeout rounds up and never spins before a deadline") {
  using P = ConnectionPolicy;
  CHECK(P::wait_timeout_ms(0, kT0) == -1);      // nothing to wait for: for ever
  CHECK(P::wait_timeout_ms(kT0 - 1, kT0) == 0); // passed
  CHECK(P::wait_timeout_ms(kT0, kT0) == 0);     // due now
  CHECK(P::wait_timeout_ms(kT0 + 1, kT0) == 1); // 1 ns: one ms, not zero
  CHECK(P::wait_timeout_ms(kT0 + 1500 * kMs, kT0) == 1501);
}
