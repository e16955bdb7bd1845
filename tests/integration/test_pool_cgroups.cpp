// memory-max and cpu-weight (fcgi_host/pools/cgroups.hpp): refused, naming the pool, the
// option and why, where no delegated cgroup v2 carries them (at start, in --test-config, at a
// reload, which then changes nothing); a pool without limits never leaves the master's cgroup;
// and, where a writable cgroup v2 subtree with the memory controller exists, a worker past
// memory-max is killed by the OOM killer and its exit line and the metrics say so.
#include "commands.hpp"
#include "harness.hpp"
#include "process_manager/cgroup_v2.hpp"
#include "support/skip.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <sys/stat.h>
#include <unistd.h>

namespace {

namespace pm = process_manager;
using it::HostOptions;
using it::HostProcess;
using it::Millis;

constexpr Millis kCgroupWait{10000};

bool has_word(const std::string& file, const std::string& word) {
  const std::vector<std::string> words = pm::split_words(it::read_file(file));
  return std::find(words.begin(), words.end(), word) != words.end();
}

// This test's cgroup directory, or empty (and `why`).
std::string own_cgroup(std::string& why) {
  return pm::own_cgroup_directory(why).value_or("");
}

// Would the master of the pools, started from here, carry `controller`? The same questions it
// asks (pool_cgroup.cpp).
bool cgroup_usable(const std::string& controller, std::string& why) {
  const std::string dir = own_cgroup(why);
  if (dir.empty()) return false;
  if (!has_word(dir + "/cgroup.controllers", controller)) {
    why = "no " + controller + " controller in " + dir;
    return false;
  }
  if (::access((dir + "/cgroup.subtree_control").c_str(), W_OK) != 0) {
    why = dir + " is not writable";
    return false;
  }
  return true;
}

using it::pool_section;

HostOptions pools(std::string main_conf, std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"--config", "{dir}/main.conf"};
  args.insert(args.end(), extra.begin(), extra.end());
  return HostOptions{
      std::move(args), {{"main.conf", std::move(main_conf)}}, it::Listen::AsGiven, false};
}

std::string cgroup_line(pid_t pid) {
  std::optional<std::string> path = pm::parse_cgroup2_path(
      it::read_file(pid > 0 ? "/proc/" + std::to_string(pid) + "/cgroup" : "/proc/self/cgroup"));
  return path.value_or("none");
}

// The --pool NAME master under the master of the pools.
pid_t pool_master(pid_t master, const std::string& name) {
  for (pid_t child : it::child_pids(master))
    if (it::read_file("/proc/" + std::to_string(child) + "/cmdline")
            .find(std::string("--pool") + '\0' + name) != std::string::npos)
      return child;
  return 0;
}

} // namespace

TEST_SUITE("pools") {

  TEST_CASE(
      "memory-max and cpu-weight without a usable cgroup v2: start and --test-config refuse") {
    int usable = 0;
    for (auto [option, controller, value] :
         {std::tuple{"memory-max", "memory", "64M"}, std::tuple{"cpu-weight", "cpu", "200"}}) {
      CAPTURE(option);
      std::string why;
      if (cgroup_usable(controller, why)) {
        MESSAGE("not checked for " << option << ": this machine's cgroup v2 has the " << controller
                                   << " controller, so nothing is refused");
        ++usable;
        continue;
      }
      const std::string conf =
          "workers = 1\n" + pool_section("plain", "app = hello\n") +
          pool_section("lim", "app = hello\n" + std::string(option) + " = " + value + "\n");
      for (bool test_config : {true, false}) {
        CAPTURE(test_config);
        it::RunResult r =
            it::run_host(pools(conf, test_config ? std::vector<std::string>{"--test-config"}
                                                 : std::vector<std::string>{}),
                         kCgroupWait);
        CHECK(r.status == 2);
        INFO(r.output);
        CHECK(r.output.find("pool [lim]: ") != std::string::npos);
        CHECK(r.output.find("main.conf:8 [lim]: " + std::string(option) + ": ") !=
              std::string::npos);
        CHECK(r.output.find("; run under systemd with Delegate=yes") != std::string::npos);
        CHECK(r.output.find("fcgi-host running") == std::string::npos);
      }
    }
    if (usable == 2)
      test_support::skip("this machine's cgroup v2 has the memory and cpu controllers, so nothing "
                         "is refused");
  }

  TEST_CASE("a reload that adds memory-max where the cgroup cannot carry it changes nothing") {
    std::string why;
    if (cgroup_usable("memory", why)) {
      return test_support::skip("this machine's cgroup v2 has the memory controller, so nothing "
                                "is refused");
    }
    HostProcess host(pools("workers = 1\n" + pool_section("a", "app = hello\n")));
    const std::string sock = host.dir().file("a.sock");
    REQUIRE_MESSAGE(it::wait_for(
                        [&] {
                          try {
                            ::close(fcgi_test::connect_socket("unix:" + sock, Millis{200}));
                            return true;
                          } catch (const std::exception&) {
                            return false;
                          }
                        },
                        kCgroupWait),
                    host.log());
    const pid_t before = pool_master(host.pid(), "a");
    REQUIRE(before > 0);
    // A pool without limits never leaves the cgroup it was started in.
    CHECK(cgroup_line(before) == cgroup_line(0));
    CHECK(cgroup_line(host.pid()) == cgroup_line(0));
    std::string conf = "workers = 1\n" + pool_section("a", "app = hello\nmemory-max = 64M\n");
    for (auto at = conf.find("{dir}"); at != std::string::npos; at = conf.find("{dir}"))
      conf.replace(at, 5, host.dir().path());
    host.dir().write("main.conf", conf);
    host.signal(SIGHUP);
    REQUIRE_MESSAGE(host.wait_log("reload refused", kCgroupWait), host.log());
    host.expect_log(
        "reload refused, every pool keeps running as it is: pool \\[a\\]: .*main.conf:5 "
        "\\[a\\]: memory-max: .*Delegate=yes");
    CHECK(pool_master(host.pid(), "a") == before);
    CHECK(cgroup_line(before) == cgroup_line(0));
    fcgi_test::Response r = fcgi_test::Client::connect(sock).request("GET", "/");
    CHECK(r.status == 200);
  }

  TEST_CASE("a worker past memory-max is killed by the OOM killer, and the exit line says so") {
    // The host needs a cgroup of its own that it can give the memory controller to its
    // children: a new one under this test's, which must hand the memory controller down.
    std::string why;
    const std::string parent = own_cgroup(why);
    if (parent.empty() || !has_word(parent + "/cgroup.subtree_control", "memory") ||
        ::access((parent + "/cgroup.subtree_control").c_str(), W_OK) != 0) {
      return test_support::skip(
          "no writable cgroup v2 subtree with the memory controller here (" +
          (parent.empty() ? why
                          : parent + "/cgroup.subtree_control lacks memory or is not writable") +
          ")");
    }
    const std::string service = parent + "/fcgi-host-test-" + std::to_string(::getpid());
    REQUIRE(::mkdir(service.c_str(), 0755) == 0);
    it::TempDir tools;
    const std::string wrapper = tools.write(
        "in-cgroup.sh", "#!/bin/sh\necho $$ > " + service + "/cgroup.procs || exit 97\nexec " +
                            HostProcess::binary() + " \"$@\"\n");
    ::chmod(wrapper.c_str(), 0755);
    const std::string real = HostProcess::binary();
    ::setenv("FCGI_HOST_BINARY", wrapper.c_str(), 1);
    {
      HostProcess host(pools("workers = 1\nstatus-listen = unix:{dir}/status.sock\n" +
                             pool_section("big", "app = echo\nmemory-max = 48M\nmax-body = 256M\n"
                                                 "spill-threshold = 256M\nmax-buffered = 256M\n")));
      ::setenv("FCGI_HOST_BINARY", real.c_str(), 1);
      REQUIRE_MESSAGE(host.wait_log("fcgi-host running 1 pool", kCgroupWait), host.log());
      const std::string sock = host.dir().file("big.sock");
      REQUIRE(it::wait_for([&] { return pool_master(host.pid(), "big") > 0; }, kCgroupWait));
      CHECK(cgroup_line(pool_master(host.pid(), "big")).ends_with("/pool-big"));
      host.allow_log("worker .* killed");
      host.allow_log("no stack trace: SIGKILL");
      try {
        fcgi_test::Client::connect(sock, Millis{5000})
            .request("POST", "/", std::string(128u << 20, 'x'));
      } catch (const std::exception&) {
        // the worker died under it: expected
      }
      CHECK_MESSAGE(host.wait_log("killed by the OOM killer \\(memory-max 48M\\)", kCgroupWait),
                    host.log());
      it::Command om = it::run_binary("status --connect unix:" + host.dir().file("status.sock") +
                                      " --openmetrics");
      CHECK_MESSAGE(om.output.find("fcgihost_oom_kills_total{pool=\"big\"} 1") != std::string::npos,
                    om.output);
      // A graceful stop, so that the host removes its pool's cgroup once empty.
      host.signal(SIGTERM);
      CHECK(host.wait_exit(kCgroupWait) == 0);
    }
    ::setenv("FCGI_HOST_BINARY", real.c_str(), 1);
    for (const char* leaf : {"/pool-big", "/supervisor", ""})
      it::wait_for([&] { return ::rmdir((service + leaf).c_str()) == 0 || errno == ENOENT; },
                   kCgroupWait);
    CHECK(::access(service.c_str(), F_OK) != 0);
  }
}
