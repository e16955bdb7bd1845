// A reload runs the plugin on disk (HUP, reload POOL, USR2, a respawn, --watch on), whether the
// build was renamed over the file or written into it; a build that does not load keeps the old
// one serving; a plugin built against other headers is refused; a file rewritten under a
// running host never takes it down; and no plugin code runs as root. The fixture answers what
// it was compiled to answer (tests/fixtures/version_plugin.cpp); the tests compile it again with
// the build's compiler.
#include "commands.hpp"
#include "harness.hpp"
#include "lifecycle_load.hpp"
#include "support/skip.hpp"
#include "throwaway_user.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <map>
#include <sstream>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace {

using it::HostOptions;
using it::HostProcess;
using it::Millis;

constexpr Millis kReloadWait{15000};

// Compiles the fixture answering `answer` into `out`; `extra`: more compiler flags.
void build_plugin(const std::string& out, const std::string& answer,
                  const std::string& extra = "") {
  it::Command c =
      it::run_shell(std::string(FCGI_TEST_CXX) +
                    " -std=c++20 -fPIC -shared -I" FCGI_HOST_SOURCE_DIR " '-DFCGI_TEST_ANSWER=\"" +
                    answer + "\"' " + extra + " -o " + out + " " FCGI_TEST_PLUGIN_SOURCE);
  REQUIRE_MESSAGE(c.status == 0, c.output);
}

// Writes `content` into the file at `path` in place (same inode), as `cp` over it does.
void write_in_place(const std::string& path, const std::string& content) {
  int fd = ::open(path.c_str(), O_WRONLY | O_TRUNC);
  REQUIRE(fd >= 0);
  REQUIRE(::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size()));
  ::close(fd);
}

std::string answer(const HostProcess& host) {
  try {
    std::string body = host.connect().request("GET", "/").body;
    while (!body.empty() && body.back() == '\n')
      body.pop_back();
    return body;
  } catch (const std::exception& e) {
    return std::string("error: ") + e.what();
  }
}

// Every worker answers `want` (asked more often than there are workers: the kernel picks one).
bool serves(const HostProcess& host, const std::string& want) {
  return it::wait_for(
      [&] {
        for (int i = 0; i < 8; ++i)
          if (answer(host) != want) return false;
        return true;
      },
      kReloadWait);
}

// A host serving a copy of the fixture (v1) as {dir}/libp.so.
HostOptions plugin_host(std::vector<std::string> more = {}) {
  HostOptions o;
  o.args = {"--app", "{dir}/libp.so", "--workers", "2"};
  o.args.insert(o.args.end(), more.begin(), more.end());
  o.files = {{"libp.so", it::read_file(FCGI_TEST_VERSION_PLUGIN)}};
  return o;
}

std::size_t count(const HostProcess& host, const std::string& pattern) {
  return it::lines_with(host.log(), pattern).size();
}

void hup_and_wait_ready(HostProcess& host) {
  std::size_t before = count(host, "ready; retiring");
  host.signal(SIGHUP);
  REQUIRE_MESSAGE(host.wait_log("ready; retiring", kReloadWait, before + 1), host.log());
}

} // namespace

TEST_SUITE("plugin reload") {

  TEST_CASE(
      "HUP serves a rebuild renamed over the plugin, then one written in place, and a respawn "
      "after kill -9 serves the new build") {
    HostProcess host(plugin_host());
    const std::string live = host.dir().file("libp.so");
    REQUIRE(serves(host, "v1"));

    build_plugin(host.dir().file("new.so"), "v2");
    REQUIRE(::rename(host.dir().file("new.so").c_str(), live.c_str()) == 0);
    hup_and_wait_ready(host);
    CHECK(serves(host, "v2"));

    build_plugin(host.dir().file("v3.so"), "v3");
    write_in_place(live, it::read_file(host.dir().file("v3.so")));
    hup_and_wait_ready(host);
    CHECK(serves(host, "v3"));

    std::vector<pid_t> workers = host.wait_workers(2);
    REQUIRE(workers.size() == 2);
    ::kill(workers[0], SIGKILL);
    REQUIRE(host.wait_worker_replaced(workers[0], 2).size() == 2);
    CHECK(serves(host, "v3"));
    // The master mapped no plugin: nothing of the file is in its address space.
    CHECK(it::read_file("/proc/" + std::to_string(host.pid()) + "/maps").find("libp.so") ==
          std::string::npos);
  }

  TEST_CASE("USR2 serves the build on disk") {
    HostProcess host(plugin_host({"--pidfile", "{dir}/host.pid"}));
    REQUIRE(serves(host, "v1"));
    build_plugin(host.dir().file("new.so"), "v2");
    REQUIRE(::rename(host.dir().file("new.so").c_str(), host.dir().file("libp.so").c_str()) == 0);
    host.signal(SIGUSR2);
    CHECK(host.wait_exit(kReloadWait).value_or(-1) == 0);
    pid_t new_master = it::read_pid(host.dir().file("host.pid"));
    CHECK(serves(host, "v2"));
    if (new_master > 0) ::kill(new_master, SIGTERM);
    CHECK(test_wait::wait_process_exit(new_master, kReloadWait));
  }

  TEST_CASE("a new build that does not load or throws at boot keeps the old one serving, with "
            "one line naming the file") {
    HostProcess host(plugin_host());
    const std::string live = host.dir().file("libp.so");
    REQUIRE(serves(host, "v1"));

    write_in_place(live, "not a shared library\n");
    host.signal(SIGHUP);
    REQUIRE(host.wait_log("reload refused", kReloadWait));
    std::vector<std::string> refused = it::lines_with(host.log(), "reload refused");
    REQUIRE(refused.size() == 1);
    CHECK(refused[0].find(live) != std::string::npos);
    CHECK(refused[0].find("dlopen") != std::string::npos);
    CHECK(serves(host, "v1"));

    build_plugin(host.dir().file("throws.so"), "v2", "-DFCGI_TEST_THROW_AT_BOOT");
    REQUIRE(::rename(host.dir().file("throws.so").c_str(), live.c_str()) == 0);
    host.allow_log("throws at boot|abandoning|boot");
    host.signal(SIGHUP);
    REQUIRE(host.wait_log("abandoning generation", kReloadWait));
    CHECK(host.log().find("this build throws at boot (test)") != std::string::npos);
    CHECK(serves(host, "v1"));
  }

  TEST_CASE("a plugin built against other headers is refused at start, in --test-config and at "
            "a reload: an older release's, and one with a virtual function more in app::Handler") {
    // What the host's line names for each plugin: the first part of the identity that differs.
    const std::map<std::string, std::string> differs = {
        {FCGI_TEST_OLD_LAYOUT_PLUGIN, "sizeof(app::Request) is 608 in the plugin"},
        {FCGI_TEST_OLD_RELEASE_PLUGIN, "older fcgi-host"},
        // No size changed: only the hash of the declarations tells.
        {FCGI_TEST_CHANGED_VTABLE_PLUGIN, "the hash of the handler API's declarations"}};
    for (const auto& [plugin, why] : differs) {
      INFO(plugin);
      for (bool test_config : {false, true}) {
        HostOptions o{{"--app", plugin, "--workers", "1"}, {}, it::Listen::UnixSocket, false};
        if (test_config) o.args.push_back("--test-config");
        it::RunResult r = it::run_host(o);
        CHECK_MESSAGE(r.status == 2, r.output);
        CHECK(r.output.find("rebuild the plugin against fcgi-host") != std::string::npos);
        CHECK_MESSAGE(r.output.find(why) != std::string::npos, r.output);
      }
    }
    HostProcess host(plugin_host());
    REQUIRE(serves(host, "v1"));
    for (const char* plugin : {FCGI_TEST_OLD_LAYOUT_PLUGIN, FCGI_TEST_CHANGED_VTABLE_PLUGIN}) {
      INFO(plugin);
      const std::size_t refusals = it::lines_with(host.log(), "reload refused").size();
      write_in_place(host.dir().file("libp.so"), it::read_file(plugin));
      host.signal(SIGHUP);
      REQUIRE(it::wait_for(
          [&] { return it::lines_with(host.log(), "reload refused").size() > refusals; },
          kReloadWait));
      CHECK(host.log().find(differs.at(plugin)) != std::string::npos);
      CHECK(serves(host, "v1"));
    }
  }

  TEST_CASE("--watch on reloads a rebuild within 2 s without a signal, and waits out a "
            "half-written file") {
    HostProcess host(plugin_host({"--watch", "on"}));
    const std::string live = host.dir().file("libp.so");
    REQUIRE(serves(host, "v1"));

    // Renamed over, as a build does.
    build_plugin(host.dir().file("new.so"), "v2");
    auto from = std::chrono::steady_clock::now();
    REQUIRE(::rename(host.dir().file("new.so").c_str(), live.c_str()) == 0);
    REQUIRE(host.wait_log("watch: " + live + " changed; reloading", Millis{2000}));
    CHECK(serves(host, "v2"));
    CHECK(std::chrono::steady_clock::now() - from < std::chrono::seconds{2} + kReloadWait);
    REQUIRE(host.wait_log("ready; retiring", kReloadWait));

    // Written in place, half of it held open past the settling time: not a change yet.
    build_plugin(host.dir().file("v3.so"), "v3");
    const std::string v3 = it::read_file(host.dir().file("v3.so"));
    int fd = ::open(live.c_str(), O_WRONLY | O_TRUNC);
    REQUIRE(fd >= 0);
    const std::size_t half = v3.size() / 2;
    REQUIRE(::write(fd, v3.data(), half) == static_cast<ssize_t>(half));
    test_wait::hold_for(Millis{1000}); // the scenario: a writer slower than the settling time
    CHECK(count(host, "changed; reloading") == 1);
    CHECK(count(host, "reload refused") == 0);
    from = std::chrono::steady_clock::now();
    REQUIRE(::write(fd, v3.data() + half, v3.size() - half) ==
            static_cast<ssize_t>(v3.size() - half));
    ::close(fd);
    REQUIRE(host.wait_log("changed; reloading", Millis{2000}, 2));
    REQUIRE(host.wait_log("ready; retiring", kReloadWait, 2));
    CHECK(std::chrono::steady_clock::now() - from < std::chrono::seconds{2} + kReloadWait);
    CHECK(serves(host, "v3"));
    CHECK(count(host, "reload refused") == 0);
  }

  TEST_CASE("cp over the live plugin under load never kills the master, and the next reload serves "
            "the new build") {
    HostProcess host(plugin_host());
    const std::string live = host.dir().file("libp.so");
    REQUIRE(serves(host, "v1"));
    build_plugin(host.dir().file("v2.so"), "v2");
    const std::string v1 = it::read_file(live), v2 = it::read_file(host.dir().file("v2.so"));

    std::atomic<bool> stop{false};
    std::atomic<int> sent{0}, failed{0};
    std::thread load([&] {
      for (int i = 0; i < 20000 && !stop; ++i) {
        std::string a = answer(host);
        if (a != "v1" && a != "v2") ++failed;
        ++sent;
      }
    });
    for (int i = 0; i < 10; ++i) {
      int before = sent;
      write_in_place(live, i % 2 ? v1 : v2);
      it::wait_for([&] { return sent > before + 20; }, kReloadWait);
    }
    write_in_place(live, v2);
    hup_and_wait_ready(host);
    stop = true;
    load.join();
    CHECK(it::process_alive(host.pid()));
    CHECK(failed == 0);
    CHECK(serves(host, "v2"));
    CHECK(count(host, "killed by signal") == 0);
  }

  TEST_CASE("pools: reload POOL and --watch reload only the pool whose plugin changed") {
    HostOptions o{{"--config", "{dir}/main.conf"}, {}, it::Listen::AsGiven, false};
    o.files = {{"main.conf", "workers = 1\nstatus-listen = unix:{dir}/status.sock\n"
                             "[a]\nlisten = unix:{dir}/a.sock\napp = {dir}/libp.so\n"
                             "watch = on\n"
                             "[b]\nlisten = unix:{dir}/b.sock\napp = {dir}/libq.so\n"},
               {"libp.so", it::read_file(FCGI_TEST_VERSION_PLUGIN)},
               {"libq.so", it::read_file(FCGI_TEST_VERSION_PLUGIN)}};
    HostProcess host(o);
    auto ask = [&](const std::string& pool) {
      try {
        std::string b =
            fcgi_test::Client::connect(host.dir().file(pool + ".sock")).request("GET", "/").body;
        return b.substr(0, b.find('\n'));
      } catch (const std::exception& e) {
        return std::string("error: ") + e.what();
      }
    };
    REQUIRE_MESSAGE(it::wait_for([&] { return ask("a") == "v1" && ask("b") == "v1"; }, kReloadWait),
                    host.log());
    auto pids_of = [&](const std::string& pool) {
      for (pid_t child : it::child_pids(host.pid()))
        if (it::read_file("/proc/" + std::to_string(child) + "/cmdline")
                .find(std::string("--pool") + '\0' + pool) != std::string::npos)
          return it::child_pids(child);
      return std::vector<pid_t>{};
    };
    const std::vector<pid_t> a_before = pids_of("a");
    std::vector<pid_t> b_before = pids_of("b");
    REQUIRE(b_before.size() == 1);

    // reload b: b serves its rebuild.
    build_plugin(host.dir().file("q2.so"), "q2");
    REQUIRE(::rename(host.dir().file("q2.so").c_str(), host.dir().file("libq.so").c_str()) == 0);
    it::Command reload =
        it::run_binary("reload b --connect unix:" + host.dir().file("status.sock"));
    CHECK_MESSAGE(reload.status == 0, reload.output);
    CHECK(it::wait_for([&] { return ask("b") == "q2"; }, kReloadWait));
    CHECK(pids_of("a") == a_before);
    CHECK(ask("a") == "v1");

    // a watches: its rebuild reloads a alone. (b's old worker may still be on its way out
    // after its last request: b's workers are counted once it is gone.)
    REQUIRE(it::wait_for([&] { return pids_of("b").size() == 1; }, kReloadWait));
    b_before = pids_of("b");
    build_plugin(host.dir().file("p2.so"), "p2");
    REQUIRE(::rename(host.dir().file("p2.so").c_str(), host.dir().file("libp.so").c_str()) == 0);
    CHECK_MESSAGE(it::wait_for([&] { return ask("a") == "p2"; }, kReloadWait), host.log());
    CHECK(pids_of("b") == b_before);
    CHECK(host.log().find("[a]") != std::string::npos);
  }

  TEST_CASE("a bare file name is a plugin in the directory fcgi-host starts in, also after a "
            "reload and USR2 with --chdir") {
    it::TempDir dir;
    ::chmod(dir.path().c_str(), 0755);
    dir.write("libbare.so", it::read_file(FCGI_TEST_VERSION_PLUGIN));
    it::Command c = it::run_shell("cd " + dir.path() + " && " + HostProcess::binary() +
                                  " --app libbare.so --test-config");
    CHECK_MESSAGE(c.status == 0, c.output);
    it::Command missing =
        it::run_shell("cd / && " + HostProcess::binary() + " --app libbare.so --test-config");
    CHECK(missing.status == 2);
    CHECK_MESSAGE(missing.output.find("\"/libbare.so\"") != std::string::npos, missing.output);

    // Still there after the master changed directory: at a reload and after USR2.
    HostOptions o = plugin_host({"--chdir", "/", "--pidfile", "{dir}/host.pid"});
    o.args[1] = "libp.so"; // the host starts in its temp dir
    HostProcess host(o);
    REQUIRE(serves(host, "v1"));
    build_plugin(host.dir().file("new.so"), "v2");
    REQUIRE(::rename(host.dir().file("new.so").c_str(), host.dir().file("libp.so").c_str()) == 0);
    hup_and_wait_ready(host);
    CHECK(serves(host, "v2"));
    host.signal(SIGUSR2);
    CHECK(host.wait_exit(kReloadWait).value_or(-1) == 0);
    pid_t new_master = it::read_pid(host.dir().file("host.pid"));
    CHECK(serves(host, "v2"));
    if (new_master > 0) ::kill(new_master, SIGTERM);
    CHECK(test_wait::wait_process_exit(new_master, kReloadWait));
  }

  TEST_CASE("no plugin code runs as root: start, HUP, USR2, --test-config and pools load it as "
            "the workers' user") {
    it::ThrowawayUser throwaway;
    if (!throwaway.made()) {
      return test_support::skip(throwaway.why_not());
    }
    const std::string& user = throwaway.name();
    it::TempDir shared; // the euid log: the throwaway user writes it
    ::chmod(shared.path().c_str(), 0711);
    const std::string euids = shared.write("euid.log", "");
    ::chmod(euids.c_str(), 0666);
    const std::string env = "FCGI_TEST_EUID_LOG=" + euids;
    auto lines = [&] { return it::lines_with(it::read_file(euids), " ").size(); };

    HostProcess host(plugin_host({"--user", user, "--env", env, "--pidfile", "{dir}/host.pid"}));
    REQUIRE(serves(host, "v1"));
    // One worker serving says nothing of the other's load: each count is waited for.
    auto lines_reach = [&](std::size_t n) {
      return it::wait_for([&] { return lines() >= n; }, kReloadWait);
    };
    CHECK(lines_reach(3)); // the start check and two workers
    const std::size_t at_start = lines();
    hup_and_wait_ready(host);
    CHECK(lines_reach(at_start + 3));
    const std::size_t before_upgrade = lines();
    host.signal(SIGUSR2);
    CHECK(host.wait_exit(kReloadWait).value_or(-1) == 0);
    pid_t new_master = it::read_pid(host.dir().file("host.pid"));
    CHECK(serves(host, "v1"));
    CHECK(lines_reach(before_upgrade + 3));
    if (new_master > 0) ::kill(new_master, SIGTERM);
    CHECK(test_wait::wait_process_exit(new_master, kReloadWait));

    const std::size_t before_check = lines();
    it::Command check = it::run_binary("--app " + host.dir().file("libp.so") + " --user " + user +
                                       " --env " + env + " --test-config");
    CHECK_MESSAGE(check.status == 0, check.output);
    CHECK(lines() == before_check + 1);

    HostOptions o{{"--config", "{dir}/main.conf"}, {}, it::Listen::AsGiven, false};
    o.files = {{"main.conf", "workers = 1\nuser = " + user + "\nenv = " + env +
                                 "\n[a]\nlisten = unix:{dir}/a.sock\napp = {dir}/libp.so\n"},
               {"libp.so", it::read_file(FCGI_TEST_VERSION_PLUGIN)}};
    const std::size_t before_pools = lines();
    {
      HostProcess pools(o);
      CHECK(it::wait_for(
          [&] {
            try {
              return fcgi_test::Client::connect(pools.dir().file("a.sock"))
                         .request("GET", "/")
                         .body == "v1\n";
            } catch (const std::exception&) {
              return false;
            }
          },
          kReloadWait));
    }
    CHECK(lines() >= before_pools + 2);

    std::istringstream in(it::read_file(euids));
    int loads = 0;
    for (std::string line; std::getline(in, line); ++loads)
      CHECK_MESSAGE(!line.starts_with("0 "), "plugin code ran as root: " << line);
    CHECK(loads >= 10);
  }
}
