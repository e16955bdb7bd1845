// Floods of idle, trickling and body-hoarding connections against the real host: under
// pressure (--max-connections, --max-buffered) each worker closes the connections that made
// the least progress, so a normal request is served at once however many hostile connections
// are held, memory stays within the budget, and the log stays short.
#include "checks.hpp"
#include "request_modes.hpp"
#include "support/time.hpp"

#include <chrono>
#include <fstream>
#include <optional>
#include <sys/socket.h>
#include <sys/stat.h>

using fcgi_test::Client;
using fcgi_test::IoStatus;
using fcgi_test::Millis;
using fcgi_test::RecordType;
using it::HostProcess;
using Clock = std::chrono::steady_clock;

namespace {

std::string request_head(std::uint16_t id, std::size_t body_size) {
  return fcgi_test::encode_record(RecordType::BeginRequest, id, fcgi_test::begin_request_body()) +
         fcgi_test::encode_stream(
             RecordType::Params, id,
             fcgi_test::encode_params(fcgi_test::standard_params("POST", "/hoard", body_size)));
}

// Lines the worker wrote about the flood: written ones, plus the "N more ... not logged" counts.
std::size_t warn_lines(const HostProcess& host) {
  return it::lines_with(host.log(), "[warn]").size();
}

} // namespace

TEST_SUITE("floods") {

  REQUEST_PATH_CASE(
      "500 idle connections on 2 workers of 64 slots: a normal request is served at once") {
    HostProcess host(it::with_threads(
        {"--app", "echo", "--workers", "2", "--max-connections", "64", "--header-timeout", "30"}));
    std::vector<Client> idle;
    for (int i = 0; i < 500; ++i)
      idle.push_back(host.connect(Millis{5000})); // nothing sent: the least progress there is
    double took = it::timed_request(host, "/normal");
    MESSAGE("normal request beside 500 idle connections: " << took * 1000 << " ms; "
                                                           << warn_lines(host) << " log lines");
    CHECK(took < 1.0);
    // The oldest idle connections were closed to make room (the host says so, briefly).
    std::size_t closed = 0;
    for (Client& c : idle)
      closed += c.read_until_closed(Millis{1}).status == IoStatus::Closed;
    CHECK(closed >= 500 - 2 * 64);
    CHECK(warn_lines(host) < 40);
    it::check_no_alerts(host);
  }

  REQUEST_PATH_CASE(
      "300 connections trickling bodies on 2 workers of 64 slots: a normal request is "
      "served at once") {
    HostProcess host(it::with_threads(
        {"--app", "echo", "--workers", "2", "--max-connections", "64", "--body-timeout", "30"}));
    // The host evicts connections while they are opened and fed: a send that fails is one of
    // those evictions, not an error.
    auto send_unless_evicted = [](Client& c, const std::string& bytes) {
      try {
        c.send_raw(bytes);
      } catch (const fcgi_test::Error&) {}
    };
    std::vector<Client> tricklers;
    for (int i = 0; i < 300; ++i) {
      tricklers.push_back(host.connect(Millis{5000}));
      send_unless_evicted(tricklers.back(), request_head(1, 1000) + fcgi_test::encode_record(
                                                                        RecordType::Stdin, 1, "x"));
    }
    // Another byte on each that is still open: steady, slow progress.
    for (Client& c : tricklers)
      if (c.read_until_closed(Millis{1}).status != IoStatus::Closed)
        send_unless_evicted(c, fcgi_test::encode_record(RecordType::Stdin, 1, "y"));
    double took = it::timed_request(host, "/normal");
    MESSAGE("normal request beside 300 trickling bodies: " << took * 1000 << " ms; "
                                                           << warn_lines(host) << " log lines");
    CHECK(took < 1.0);
    CHECK(warn_lines(host) < 40);
    it::check_no_alerts(host);
  }

  REQUEST_PATH_CASE("20 unfinished 8 MiB bodies: the worker stays within --max-buffered") {
    // Freed memory must really be freed for RSS to tell: no ASan quarantine in the host.
    it::ScopedEnv asan("ASAN_OPTIONS", "quarantine_size_mb=0:detect_leaks=1:abort_on_error=0");
    HostProcess host(it::with_threads({"--app", "echo", "--workers", "1", "--max-body", "9M",
                                       "--max-buffered", "24M", "--body-timeout", "30"}));
    auto workers = host.wait_workers(1);
    REQUIRE(workers.size() == 1);
    long before = it::rss_kib(workers[0]);
    std::string chunk(60000, 'h');
    std::vector<Client> hoarders;
    long peak = 0;
    std::size_t cut = 0;
    for (int i = 0; i < 20; ++i) {
      Client c = host.connect(Millis{5000});
      std::string all = request_head(1, 8u << 20);
      for (std::size_t sent = 0; sent + chunk.size() < (8u << 20) - 1; sent += chunk.size())
        all += fcgi_test::encode_record(RecordType::Stdin, 1, chunk);
      // Sent from a thread of its own would be faster; a blocking send is bounded by the
      // socket's timeout, and an evicted connection fails it: both are fine here.
      try {
        c.send_raw(all);
      } catch (const std::exception&) {
        ++cut;
      }
      hoarders.push_back(std::move(c));
      peak = std::max(peak, it::rss_kib(workers[0]));
    }
    double took = it::timed_request(host, "/normal");
    long after = it::rss_kib(workers[0]);
    MESSAGE("worker RSS " << before << " kB before, peak " << peak << " kB, " << after
                          << " kB after 20 unfinished 8 MiB bodies; normal request " << took * 1000
                          << " ms");
    CHECK(peak - before < 48 * 1024); // --max-buffered 24M, plus buffer growth slack
    CHECK(took < 1.0);
    // Large bodies are read straight into their request's storage as they come, so the worker
    // may stay within the bound without evicting anyone; when it evicts, it says why.
    for (const std::string& line : it::lines_with(host.log(), "closed"))
      if (line.find("buffered") != std::string::npos)
        CHECK(line.find("--max-buffered") != std::string::npos);
    it::check_no_alerts(host);
  }

  REQUEST_PATH_CASE(
      "EMFILE on accept: a burst of lines, then counts that grow apart (not 10 a second)") {
    // The host under a low file limit: a wrapper sets it, then execs the real binary.
    it::TempDir wrap;
    std::string script = wrap.write("fcgi-host", "#!/bin/sh\nulimit -n 48\nexec '" +
                                                     HostProcess::binary() + "' \"$@\"\n");
    ::chmod(script.c_str(), 0755);
    std::string real = HostProcess::binary();
    it::ScopedEnv binary("FCGI_HOST_BINARY", script);
    HostProcess host(
        it::with_threads({"--app", "echo", "--workers", "1", "--header-timeout", "30"}));
    std::vector<Client> held;
    for (int i = 0; i < 80; ++i)
      held.push_back(host.connect(Millis{5000})); // past the worker's fds: EMFILE on accept
    auto start = Clock::now();
    auto emfile_lines = [&] { return it::lines_with(host.log(), "Too many open files").size(); };
    // The worker retries every 100 ms: 30 attempts in 3 s, a burst of them written.
    CHECK(it::wait_for([&] { return test_support::elapsed_s(start) > 3.0; }, Millis{4000}));
    std::size_t lines = emfile_lines() + it::lines_with(host.log(), "not logged").size();
    MESSAGE("EMFILE for 3 s: " << lines << " log lines");
    CHECK(emfile_lines() >= 1);
    CHECK(lines <= 14);
    held.clear();
    CHECK(it::timed_request(host, "/normal") < 1.0);
  }
}
