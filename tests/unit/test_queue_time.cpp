// Queue time: reading the web server's arrival stamp, the wait, the shedding decision, and the
// exited worker's queue numbers surviving in the retired totals.
#include "fcgi_host/observe/host_slot.hpp"
#include "fcgi_host/observe/metrics.hpp"
#include "fcgi_host/observe/queue_time.hpp"
#include "process_manager/scoreboard.hpp"

#include <doctest/doctest.h>

using namespace fcgi_host;

TEST_SUITE("queue time") {

  TEST_CASE("arrival stamps: nginx ${msec} and the whole ms / us / ns forms of APM tools") {
    CHECK(parse_request_start_us("t=1700000000.123") == 1'700'000'000'123'000);
    CHECK(parse_request_start_us("1700000000.5") == 1'700'000'000'500'000);
    CHECK(parse_request_start_us("t=1700000000") == 1'700'000'000'000'000);
    CHECK(parse_request_start_us("t=1700000000123") == 1'700'000'000'123'000);
    CHECK(parse_request_start_us("t=1700000000123456") == 1'700'000'000'123'456);
    CHECK(parse_request_start_us("t=1700000000123456789") == 1'700'000'000'123'456);
    CHECK(parse_request_start_us("t=1700000000.123456789") == 1'700'000'000'123'456);
    CHECK_FALSE(parse_request_start_us(""));
    CHECK_FALSE(parse_request_start_us("t="));
    CHECK_FALSE(parse_request_start_us("t=abc"));
    CHECK_FALSE(parse_request_start_us("t=17000 00"));
    CHECK_FALSE(parse_request_start_us("t=-5"));
    CHECK_FALSE(parse_request_start_us("t=99999999999999999999999")); // overflow
  }

  TEST_CASE("the wait: a stamp from the future is no wait and one older than a day no stamp") {
    CHECK(queue_ns(1'000'000, 1'250'000) == 250'000'000u);
    CHECK(queue_ns(2'000'000, 1'000'000) == 0u);
    CHECK_FALSE(queue_ns(0, 90'000'000'000));
  }

  TEST_CASE("shedding: off runs everything and on sheds the late and the abandoned") {
    CHECK(decide(5'000'000'000, 0, true) == QueueDecision::Run);
    CHECK(decide(100'000'001, 100'000'000, false) == QueueDecision::ShedLate);
    CHECK(decide(100'000'000, 100'000'000, false) == QueueDecision::Run);
    CHECK(decide(std::nullopt, 100'000'000, false) == QueueDecision::Run);
    CHECK(decide(std::nullopt, 100'000'000, true) == QueueDecision::ClientGone);
    app::Response r;
    answer_shed(r);
    CHECK(r.status == 503);
  }

  TEST_CASE("an exited worker's queue time and shed counts stay in the totals") {
    process_manager::Scoreboard sb(2, 1, fcgi_host::kHostArea);
    for (std::size_t i = 0; i < 2; ++i)
      sb.prepare(i, 1);
    sb.slot(0).generation = 1;
    sb.slot(0).pid = 1;
    sb.slot(0).state = process_manager::WorkerState::Idle;
    fcgi_host::host_slot(sb, 0).queue_buckets[3] = 2;
    fcgi_host::host_slot(sb, 0).queue_sum_ns = 15'000'000;
    fcgi_host::host_slot(sb, 0).shed_late = 4;
    fcgi_host::host_slot(sb, 0).shed_gone = 1;
    Snapshot before = take_snapshot(sb, -1, "static");
    sb.retire(0);
    sb.slot(0).state = process_manager::WorkerState::Free;
    Snapshot after = take_snapshot(sb, -1, "static");
    for (const Snapshot& s : {before, after}) {
      CHECK(s.queued() == 2);
      CHECK(s.queue_buckets[3] == 2);
      CHECK(s.queue_sum_ns == 15'000'000);
      CHECK(s.shed_late == 4);
      CHECK(s.shed_gone == 1);
    }
  }
}
