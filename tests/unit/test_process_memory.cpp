// The status page's memory figures: smaps_rollup text as the kernel writes it, a file that is
// missing or cut short, and a snapshot whose worker vanished (left out, no error) or whose master
// cannot be read (no total).
#include "fcgi_host/observe/process_memory.hpp"
#include "support/files.hpp"
#include "support/skip.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <sys/wait.h>
#include <unistd.h>

namespace {

// /proc/PID/smaps_rollup of a small process (Linux 6.x).
constexpr const char* kRollup = "55d0c8a6e000-7ffc5a9f6000 ---p 00000000 00:00 0    [rollup]\n"
                                "Rss:                4096 kB\n"
                                "Pss:                1234 kB\n"
                                "Pss_Dirty:           700 kB\n"
                                "Pss_Anon:            650 kB\n"
                                "Pss_File:            584 kB\n"
                                "Shared_Clean:       2800 kB\n"
                                "Private_Dirty:       700 kB\n"
                                "Swap:                  0 kB\n"
                                "SwapPss:               0 kB\n"
                                "Locked:                0 kB\n";

} // namespace

TEST_SUITE("process memory") {

  TEST_CASE("smaps_rollup: Rss and Pss in bytes, not Pss_Anon and the like") {
    std::optional<fcgi_host::ProcessMemory> m = fcgi_host::parse_smaps_rollup(kRollup);
    REQUIRE(m);
    CHECK(m->rss_bytes == 4096u * 1024);
    CHECK(m->pss_bytes == 1234u * 1024);
  }

  TEST_CASE("smaps_rollup: a text without Pss or with a bad figure gives nothing") {
    CHECK_FALSE(fcgi_host::parse_smaps_rollup(""));
    CHECK_FALSE(fcgi_host::parse_smaps_rollup("Rss: 4096 kB\n"));
    CHECK_FALSE(fcgi_host::parse_smaps_rollup("Rss: 4096 kB\nPss: kB\n"));
    CHECK_FALSE(fcgi_host::parse_smaps_rollup("Rss: 4096 kB\nPss_Anon: 12 kB\n"));
  }

  TEST_CASE("smaps_rollup files: a copy reads as the text, a missing file gives nothing") {
    std::string path = test_support::temp_template("rollup");
    int fd = ::mkstemp(path.data());
    REQUIRE(fd >= 0);
    ::close(fd);
    std::ofstream(path) << kRollup;
    std::optional<fcgi_host::ProcessMemory> m = fcgi_host::read_smaps_rollup_file(path.c_str());
    ::unlink(path.c_str());
    REQUIRE(m);
    CHECK(m->pss_bytes == 1234u * 1024);
    CHECK_FALSE(fcgi_host::read_smaps_rollup_file(path.c_str()));
  }

  TEST_CASE("a snapshot: live processes are read, a vanished worker is left out, no total "
            "without the master") {
    if (!fcgi_host::read_process_memory(::getpid())) {
      test_support::skip("/proc/PID/smaps_rollup cannot be read here (Linux before 4.14?)");
      return;
    }
    // A child that has exited and been reaped: its pid names no process.
    pid_t gone = ::fork();
    REQUIRE(gone >= 0);
    if (gone == 0) ::_exit(0);
    int status = 0;
    REQUIRE(::waitpid(gone, &status, 0) == gone);

    fcgi_host::Snapshot snap;
    snap.workers.resize(2);
    snap.workers[0].pid = ::getpid();
    snap.workers[1].pid = gone;
    fcgi_host::add_process_memory(snap, ::getppid());
    REQUIRE(snap.workers[0].memory);
    CHECK(snap.workers[0].memory->pss_bytes > 0);
    CHECK(snap.workers[0].memory->rss_bytes >= snap.workers[0].memory->pss_bytes);
    CHECK_FALSE(snap.workers[1].memory);
    CHECK(snap.pss_processes == 2); // the worker read and the master
    CHECK(snap.pss_total_bytes > snap.workers[0].memory->pss_bytes);

    // A master that cannot be read: the workers' figures, no total.
    fcgi_host::Snapshot partial;
    partial.workers.resize(1);
    partial.workers[0].pid = ::getpid();
    fcgi_host::add_process_memory(partial, gone);
    CHECK(partial.workers[0].memory);
    CHECK(partial.pss_processes == 0);
    CHECK(partial.pss_total_bytes == 0);
  }
}
