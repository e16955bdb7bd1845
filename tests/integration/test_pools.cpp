// Several pools under one master (config_file.hpp, pools/supervisor.hpp): each on its own socket,
// as its own user, with its own limits; a reload touches only the pools that changed; a pool that
// fails stops alone. Through a real nginx with one location per pool.
#include "commands.hpp"
#include "harness.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <iterator>
#include <map>
#include <sstream>
#include <sys/resource.h>
#include <sys/stat.h>
#include <thread>

namespace {

using it::HostOptions;
using it::HostProcess;
using it::Millis;

constexpr Millis kPoolWait{10000};

// The --pool NAME masters under the master of the pools, by name.
std::map<std::string, pid_t> pool_masters(pid_t master) {
  std::map<std::string, pid_t> out;
  for (pid_t child : it::child_pids(master)) {
    std::string cmdline = it::read_file("/proc/" + std::to_string(child) + "/cmdline");
    auto at = cmdline.find(std::string("--pool") + '\0');
    if (at == std::string::npos) continue;
    std::string rest = cmdline.substr(at + 7);
    out[rest.substr(0, rest.find('\0'))] = child;
  }
  return out;
}

std::vector<pid_t> sorted(std::vector<pid_t> pids) {
  std::sort(pids.begin(), pids.end());
  return pids;
}

// Workers of a pool: its master's children, once there are `n` of them.
std::vector<pid_t> pool_workers(pid_t master, const std::string& pool, std::size_t n) {
  std::vector<pid_t> workers;
  it::wait_for(
      [&] {
        auto masters = pool_masters(master);
        workers = masters.count(pool) ? it::child_pids(masters[pool]) : std::vector<pid_t>{};
        return workers.size() == n;
      },
      kPoolWait);
  return sorted(workers);
}

std::string status_field(pid_t pid, const std::string& field) {
  std::istringstream in(it::read_file("/proc/" + std::to_string(pid) + "/status"));
  for (std::string line; std::getline(in, line);)
    if (line.starts_with(field + ":")) return line.substr(field.size() + 1);
  return "";
}

bool accepts(const std::string& address) {
  try {
    ::close(fcgi_test::connect_socket(address, Millis{200}));
    return true;
  } catch (const std::exception&) {
    return false;
  }
}

// A master of pools on the files of `files` ("{dir}" is its temp dir), main.conf first.
struct Pools {
  HostProcess host;
  explicit Pools(std::map<std::string, std::string> files, std::vector<std::string> allow = {})
      : host(HostOptions{{"--config", "{dir}/main.conf"},
                         std::move(files),
                         it::Listen::AsGiven,
                         false,
                         false,
                         {},
                         std::move(allow)}) {}
  std::string sock(const std::string& pool) const { return host.dir().file(pool + ".sock"); }
  void wait_serving(const std::vector<std::string>& pools) {
    for (const std::string& p : pools)
      REQUIRE_MESSAGE(it::wait_for([&] { return accepts(sock(p)); }, kPoolWait),
                      "pool " << p << " never listened; log:\n"
                              << host.log());
  }
  void write(const std::string& name, std::string text) {
    for (auto at = text.find("{dir}"); at != std::string::npos; at = text.find("{dir}"))
      text.replace(at, 5, host.dir().path());
    host.dir().write(name, text);
  }
  void reload_and_wait(std::size_t reloads) {
    host.signal(SIGHUP);
    REQUIRE_MESSAGE(host.wait_log("reload(:| refused)", kPoolWait, reloads), host.log());
  }
};

using it::pool_section;

// GETs through nginx to every location in turn until stopped (bounded): counts non-200s.
class Load {
public:
  Load(int port, std::vector<std::string> paths) {
    thread_ = std::thread([this, port, paths] {
      const auto end = std::chrono::steady_clock::now() + std::chrono::seconds{30};
      for (std::size_t i = 0; !stop_ && std::chrono::steady_clock::now() < end; ++i) {
        try {
          if (it::http_request(port, "GET", paths[i % paths.size()]).status != 200) ++failed_;
        } catch (const std::exception&) {
          ++failed_;
        }
        ++sent_;
      }
    });
  }
  ~Load() { finish(); }
  void finish() {
    stop_ = true;
    if (thread_.joinable()) thread_.join();
  }
  int failed() const { return failed_; }
  int sent() const { return sent_; }

private:
  std::atomic<bool> stop_{false};
  std::atomic<int> failed_{0}, sent_{0};
  std::thread thread_;
};

} // namespace

TEST_SUITE("pools") {

  TEST_CASE(
      "three pools behind one nginx: own sockets and users, a reload touches only what changed") {
    Pools p({{"main.conf", "workers = 1\npidfile = {dir}/master.pid\ninclude = pools.d/*.conf\n" +
                               pool_section("a", "app = echo\nuser = nobody\n")},
             {"pools.d/b.conf", pool_section("b", "app = echo\nuser = daemon\nworkers = 2\n")},
             {"pools.d/c.conf", pool_section("c", "app = hello\n")}});
    p.wait_serving({"a", "b", "c"});
    it::NginxProcess nginx({p.sock("a"), 0, "64m", {{"/b/", p.sock("b")}, {"/c/", p.sock("c")}}});
    // Each location reaches its own pool, whose workers run as that pool's user.
    CHECK(it::http_request(nginx.port(), "GET", "/a/x").body.find("uri=/a/x") != std::string::npos);
    CHECK(it::http_request(nginx.port(), "GET", "/b/y").body.find("uri=/b/y") != std::string::npos);
    CHECK(it::http_request(nginx.port(), "GET", "/c/z").body == "OK");
    const pid_t master = p.host.pid();
    std::vector<pid_t> a = pool_workers(master, "a", 1), b = pool_workers(master, "b", 2),
                       c = pool_workers(master, "c", 1);
    REQUIRE(a.size() == 1);
    REQUIRE(b.size() == 2);
    CHECK(status_field(a[0], "Uid").starts_with("\t65534"));
    CHECK(status_field(b[0], "Uid").starts_with("\t1\t"));
    CHECK(std::stoi(it::read_file(p.host.dir().file("master.pid"))) == master);

    Load load(nginx.port(), {"/a/", "/b/"});
    // One pool's workers change: only its pids change.
    p.write("pools.d/b.conf", pool_section("b", "app = echo\nuser = daemon\nworkers = 3\n"));
    p.reload_and_wait(1);
    CHECK(p.host.wait_log("\\[b\\] reloads; \\[c\\] unchanged; \\[a\\] unchanged"));
    // The old generation goes once the new one serves: until then the two together may count 3.
    for (pid_t pid : b)
      CHECK(it::wait_for([pid] { return !it::process_alive(pid); }, kPoolWait));
    std::vector<pid_t> b2 = pool_workers(master, "b", 3);
    CHECK(b2.size() == 3);
    for (pid_t pid : b)
      CHECK(std::find(b2.begin(), b2.end(), pid) == b2.end());
    CHECK(pool_workers(master, "a", 1) == a);
    CHECK(pool_workers(master, "c", 1) == c);
    // A broken file refuses the whole reload; nothing changes.
    p.write("pools.d/d.conf", pool_section("d", "app = echo\nworkerz = 2\n"));
    p.reload_and_wait(2);
    CHECK(p.host.wait_log("reload refused.*pools.d/d.conf:4 \\[d\\].*workerz"));
    CHECK(pool_masters(master).size() == 3);
    // An added pool starts; a removed one stops and its socket goes.
    p.write("pools.d/d.conf", pool_section("d", "app = hello\n"));
    p.reload_and_wait(3);
    p.wait_serving({"d"});
    std::remove(p.host.dir().file("pools.d/c.conf").c_str());
    p.reload_and_wait(4);
    CHECK(p.host.wait_log("pool \\[c\\] stopped: it is no longer in the configuration", kPoolWait));
    CHECK_FALSE(accepts(p.sock("c")));
    CHECK(pool_workers(master, "a", 1) == a);
    load.finish();
    INFO("nginx error log:\n" << nginx.error_log());
    CHECK(load.sent() > 0);
    CHECK(load.failed() == 0);
    p.host.signal(SIGTERM);
    CHECK(p.host.wait_exit(kPoolWait) == 0);
    CHECK_FALSE(accepts(p.sock("a")));
  }

  TEST_CASE("a pool whose workers cannot boot stops alone, the others serve") {
    Pools p({{"main.conf", "workers = 1\n" + pool_section("good", "app = echo\n") +
                               pool_section("bad", "app = " FCGI_TEST_BOOT_FAILURE_PLUGIN "\n")}},
            {"database unreachable", "workers failed to boot"});
    p.wait_serving({"good"});
    CHECK(p.host.wait_log("pool \\[bad\\] stopped: its master exited with code 1", kPoolWait));
    CHECK_FALSE(accepts(p.sock("bad")));
    fcgi_test::Client c = fcgi_test::Client::connect(p.sock("good"));
    CHECK(c.request("GET", "/still-here").status == 200);
    CHECK_FALSE(p.host.exited());
  }

  TEST_CASE("a crash-looping pool trips its own breaker, the other pool is untouched") {
    // Each worker of "loop" aborts as soon as it is ready, without a request: young deaths
    // (within 1 s of their start) one after another, whatever the load on the machine, until
    // the breaker trips (more than 10 within 10 s).
    Pools p({{"main.conf",
              pool_section("loop", "app = " FCGI_TEST_CRASH_PLUGIN
                                   "\nworkers = 3\nenv = CRASH_PLUGIN_CRASH_WHEN_READY=1\n") +
                  pool_section("calm", "app = hello\nworkers = 1\n")}},
            {"killed by signal 6", "crash loop",
             R"(more crash(es)? suppressed \(crash lines are rate-limited)", "abort"});
    p.wait_serving({"calm"});
    const std::vector<pid_t> calm = pool_workers(p.host.pid(), "calm", 1);
    REQUIRE(calm.size() == 1);
    INFO(p.host.log());
    CHECK(p.host.wait_log("\\[loop\\]: crash loop: more than 10 crashes", kPoolWait));
    CHECK(it::lines_with(p.host.log(), "[calm]: crash loop").empty());
    CHECK(pool_workers(p.host.pid(), "calm", 1) == calm);
    fcgi_test::Client c = fcgi_test::Client::connect(p.sock("calm"));
    CHECK(c.request("GET", "/").body == "OK");
  }

  TEST_CASE("a pool's master killed again and again is started again each time, then given up") {
    Pools p({{"main.conf", "workers = 1\n" + pool_section("frail", "app = hello\n") +
                               pool_section("calm", "app = hello\n")}},
            {"killed by signal 9"});
    p.wait_serving({"frail", "calm"});
    const pid_t master = p.host.pid();
    const pid_t calm = pool_masters(master)["calm"];
    // Each kill lands right after its master started (a young death): the crash policy starts
    // it again, at once then after 100 ms doubling, and gives it up at the 6th in a row. A kill
    // that comes later than 1 s after a start (a slow machine) starts the count again: bounded.
    pid_t last = 0;
    int kills = 0;
    for (; kills < 20 && !p.host.wait_log("pool \\[frail\\] stopped: its master", Millis{1});
         ++kills) {
      pid_t frail = 0;
      const bool started = it::wait_for(
          [&] {
            auto masters = pool_masters(master);
            frail = masters.count("frail") ? masters["frail"] : 0;
            return (frail > 0 && frail != last) ||
                   p.host.wait_log("pool \\[frail\\] stopped", Millis{1});
          },
          kPoolWait);
      REQUIRE_MESSAGE(started, p.host.log());
      if (frail == 0 || frail == last) break;
      ::kill(frail, SIGKILL);
      last = frail;
      REQUIRE_MESSAGE(p.host.wait_log("pool \\[frail\\](: its master was killed by signal 9 .*; "
                                      "starting it again| stopped: its master)",
                                      kPoolWait, static_cast<std::size_t>(kills + 1)),
                      p.host.log());
    }
    INFO(p.host.log());
    CHECK(p.host.wait_log("pool \\[frail\\] stopped: its master was killed by signal 9 .*, the "
                          "6th time in a row within 1 s of its start",
                          kPoolWait));
    CHECK(it::lines_with(p.host.log(),
                         "[frail]: its master was killed by signal 9 (Killed); starting it again")
              .size() >= 5);
    CHECK(p.host.wait_log("starting it again in 100 ms", kPoolWait)); // the policy's pause
    CHECK(kills >= 6);
    CHECK_FALSE(accepts(p.sock("frail")));
    // The other pool never noticed, and the master runs on; a reload starts the pool again.
    CHECK(pool_masters(master)["calm"] == calm);
    CHECK(fcgi_test::Client::connect(p.sock("calm")).request("GET", "/").body == "OK");
    CHECK_FALSE(p.host.exited());
    p.reload_and_wait(1);
    CHECK(p.host.wait_log("\\[frail\\] started again", kPoolWait));
    p.wait_serving({"frail"});
  }

  TEST_CASE("a single pool that cannot boot stops the master with its exit code") {
    it::RunResult r = it::run_host(
        {{"--config", "{dir}/main.conf"},
         {{"main.conf", pool_section("only", "app = " FCGI_TEST_BOOT_FAILURE_PLUGIN "\n")}},
         it::Listen::AsGiven,
         false,
         false,
         {},
         {"database unreachable", "workers failed to boot", "no pool is left running"}},
        kPoolWait);
    CHECK(r.status == 1);
    CHECK(r.output.find("no pool is left running; stopping, exit 1") != std::string::npos);
  }

  TEST_CASE("rlimit-files, rlimit-core and nice reach a pool's workers") {
    Pools p({{"main.conf", "workers = 1\n" +
                               pool_section("lim", "app = hello\nrlimit-files = 777\n"
                                                   "rlimit-core = unlimited\nnice = 7\n") +
                               pool_section("plain", "app = hello\n")}});
    p.wait_serving({"lim", "plain"});
    std::vector<pid_t> lim = pool_workers(p.host.pid(), "lim", 1);
    REQUIRE(lim.size() == 1);
    std::string limits = it::read_file("/proc/" + std::to_string(lim[0]) + "/limits");
    CHECK(limits.find("Max open files            777                  777") != std::string::npos);
    CHECK(limits.find("Max core file size        unlimited            unlimited") !=
          std::string::npos);
    std::string stat = it::read_file("/proc/" + std::to_string(lim[0]) + "/stat");
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));
    std::vector<std::string> f{std::istream_iterator<std::string>(fields), {}};
    REQUIRE(f.size() > 16);
    CHECK(f[16] == "7"); // field 19 of stat: nice
    std::vector<pid_t> plain = pool_workers(p.host.pid(), "plain", 1);
    REQUIRE(plain.size() == 1);
    std::string plain_stat = it::read_file("/proc/" + std::to_string(plain[0]) + "/stat");
    CHECK(plain_stat.find(") ") != std::string::npos);
    std::istringstream plain_fields(plain_stat.substr(plain_stat.rfind(')') + 2));
    std::vector<std::string> g{std::istream_iterator<std::string>(plain_fields), {}};
    // The other pool's workers keep the nice the host started with (the test's own: a test run
    // under `nice` starts it nicer).
    errno = 0;
    const int own_nice = getpriority(PRIO_PROCESS, 0);
    REQUIRE(errno == 0);
    CHECK(g[16] == std::to_string(own_nice));
  }

  TEST_CASE("USR2 to the master of the pools: every pool's master is new, the master's pid and "
            "pidfile stay, 0 failed requests under load") {
    Pools p({{"main.conf", "workers = 1\npidfile = {dir}/master.pid\n"
                           "status-listen = unix:{dir}/status.sock\n" +
                               pool_section("a", "app = echo\n") +
                               pool_section("b", "app = hello\nworkers = 2\n")}});
    p.host.allow_log("the master of the pools is gone"); // the kill -9 at the end
    p.wait_serving({"a", "b"});
    it::NginxProcess nginx({p.sock("a"), 0, "64m", {{"/b/", p.sock("b")}}});
    const pid_t master = p.host.pid();
    std::map<std::string, pid_t> before = pool_masters(master);
    REQUIRE(before.size() == 2);
    const std::vector<pid_t> a = pool_workers(master, "a", 1), b = pool_workers(master, "b", 2);
    REQUIRE(a.size() == 1);
    REQUIRE(b.size() == 2);
    const std::string control = "unix:" + p.host.dir().file("status.sock");
    struct stat control_before {};
    REQUIRE(::stat(p.host.dir().file("status.sock").c_str(), &control_before) == 0);
    Load load(nginx.port(), {"/a/", "/b/"});
    REQUIRE(it::wait_for([&] { return load.sent() >= 20; }, kPoolWait));
    p.host.signal(SIGUSR2);
    for (const char* pool : {"a", "b"})
      REQUIRE_MESSAGE(p.host.wait_log(std::string("pool \\[") + pool +
                                          "\\]: binary upgrade: its master [0-9]+ took over",
                                      Millis{30000}),
                      p.host.log());
    const int sent_at_upgrade = load.sent();
    REQUIRE(it::wait_for([&] { return load.sent() >= sent_at_upgrade + 100; }, kPoolWait));
    load.finish();
    MESSAGE("USR2 of the master of the pools: " << load.sent() << " requests, " << load.failed()
                                                << " failed");
    INFO("nginx error log:\n" << nginx.error_log() << "\nhost log:\n" << p.host.log());
    CHECK(load.failed() == 0);
    // The same master, in the pidfile; each pool under a new master with new workers.
    CHECK(it::process_alive(master));
    CHECK(std::stoi(it::read_file(p.host.dir().file("master.pid"))) == master);
    std::map<std::string, pid_t> after = pool_masters(master);
    REQUIRE(after.size() == 2);
    for (const auto& [name, pid] : before) {
      CHECK(after[name] != pid);
      CHECK(it::wait_for([pid = pid] { return !it::process_alive(pid); }, kPoolWait));
    }
    const std::vector<pid_t> a2 = pool_workers(master, "a", 1), b2 = pool_workers(master, "b", 2);
    REQUIRE(a2.size() == 1);
    REQUIRE(b2.size() == 2);
    for (pid_t pid : b2)
      CHECK(std::find(b.begin(), b.end(), pid) == b.end());
    CHECK(a2 != a);
    // The master's status socket crossed the exec (the same socket file, never closed), and its
    // page still reaches every pool (their sockets follow their masters); ping and reload answer.
    struct stat control_after {};
    CHECK(::stat(p.host.dir().file("status.sock").c_str(), &control_after) == 0);
    CHECK(control_after.st_ino == control_before.st_ino);
    CHECK(it::lines_with(p.host.log(), "serving without it").empty());
    it::Command om = it::run_binary("status --connect " + control + " --openmetrics");
    INFO("status: " << om.output);
    CHECK(om.output.find("fcgihost_up{pool=\"a\"} 1") != std::string::npos);
    CHECK(om.output.find("fcgihost_up{pool=\"b\"} 1") != std::string::npos);
    CHECK(it::run_binary("ping --connect " + control).status == 0);
    it::Command reload = it::run_binary("reload a --connect " + control);
    CHECK(reload.status == 0);
    CHECK(reload.output.find("[a] reloads") != std::string::npos);
    // The new pool masters were started by the old ones, not by this master: they still die
    // with it.
    p.host.signal(SIGKILL);
    p.host.wait_exit(kPoolWait);
    for (pid_t pid : {after["a"], after["b"], a2[0], b2[0], b2[1]})
      CHECK(it::wait_for([pid] { return !it::process_alive(pid); }, kPoolWait));
  }

  TEST_CASE("USR2 to one pool's own master: its new master is adopted, the other pool untouched") {
    Pools p({{"main.conf", "workers = 1\npidfile = {dir}/master.pid\n" +
                               pool_section("a", "app = echo\n") +
                               pool_section("b", "app = hello\n")}});
    p.wait_serving({"a", "b"});
    const pid_t master = p.host.pid();
    const std::map<std::string, pid_t> before = pool_masters(master);
    REQUIRE(before.size() == 2);
    const std::vector<pid_t> b = pool_workers(master, "b", 1);
    ::kill(before.at("a"), SIGUSR2);
    REQUIRE_MESSAGE(
        p.host.wait_log("pool \\[a\\]: binary upgrade: its master [0-9]+ took over", kPoolWait),
        p.host.log());
    std::map<std::string, pid_t> after = pool_masters(master);
    CHECK(after["a"] != before.at("a"));
    CHECK(after["b"] == before.at("b"));
    CHECK(pool_workers(master, "b", 1) == b);
    // The pidfile stays the master's: the pool's new master found it was a pool's.
    CHECK(std::stoi(it::read_file(p.host.dir().file("master.pid"))) == master);
    fcgi_test::Client c = fcgi_test::Client::connect(p.sock("a"));
    CHECK(c.request("GET", "/after").status == 200);
    // A reload still reaches the adopted master.
    p.write("main.conf", "workers = 2\npidfile = {dir}/master.pid\n" +
                             pool_section("a", "app = echo\n") +
                             pool_section("b", "app = hello\n"));
    p.reload_and_wait(1);
    CHECK(pool_workers(master, "a", 2).size() == 2);
    p.host.signal(SIGTERM);
    CHECK(p.host.wait_exit(kPoolWait) == 0);
  }

  TEST_CASE("USR2 with a new binary that cannot run: one line, every pool keeps its master") {
    it::TempDir bin;
    const std::string copy = bin.file("fcgi-host");
    REQUIRE(it::run_shell("cp " + HostProcess::binary() + " " + copy).status == 0);
    const char* was = std::getenv("FCGI_HOST_BINARY");
    const std::string saved = was ? was : "";
    ::setenv("FCGI_HOST_BINARY", copy.c_str(), 1);
    Pools p({{"main.conf", "workers = 1\n" + pool_section("a", "app = echo\n") +
                               pool_section("b", "app = hello\n")}});
    if (saved.empty())
      ::unsetenv("FCGI_HOST_BINARY");
    else
      ::setenv("FCGI_HOST_BINARY", saved.c_str(), 1);
    p.wait_serving({"a", "b"});
    const std::map<std::string, pid_t> before = pool_masters(p.host.pid());
    REQUIRE(before.size() == 2);
    // A package upgrade put a build there that fails at once.
    std::remove(copy.c_str());
    bin.write("fcgi-host", "#!/bin/sh\necho 'fcgi-host: this build is broken' >&2\nexit 3\n");
    ::chmod(copy.c_str(), 0755);
    p.host.signal(SIGUSR2);
    REQUIRE_MESSAGE(p.host.wait_log("USR2: binary upgrade refused, every pool keeps running as it "
                                    "is: .*exited with code 3: fcgi-host: this build is broken",
                                    kPoolWait),
                    p.host.log());
    CHECK(it::lines_with(p.host.log(), "USR2").size() == 1);
    CHECK(pool_masters(p.host.pid()) == before);
    for (const char* pool : {"a", "b"})
      CHECK(accepts(p.sock(pool)));
    p.host.signal(SIGTERM);
    CHECK(p.host.wait_exit(kPoolWait) == 0);
  }

  TEST_CASE("a bad pool configuration is refused naming the file, line, pool and option") {
    struct Case {
      std::string name, main, pool_file, error;
    };
    const std::string two = pool_section("a", "app = echo\n");
    for (const Case& k : std::vector<Case>{
             {"unknown option", two, pool_section("b", "app = echo\nworkerz = 2\n"),
              "pools.d/x.conf:4 [b]: unrecognised option '--workerz=2'"},
             {"bad value", two, pool_section("b", "workers = many\n"),
              "pools.d/x.conf:3 [b]: workers: 'many' is not a whole number"},
             {"bad name", two, "[b c]\n", "pools.d/x.conf:1: pool name 'b c'"},
             {"global in a pool", two, pool_section("b", "pidfile = /tmp/x\n"),
              "pools.d/x.conf:3 [b]: pidfile is a global option"},
             {"two on one address", two, "[b]\nlisten = unix:{dir}/a.sock\n",
              "main.conf:3 [a]: listen: pool [a] listens on unix:"},
             {"no listen", two, "[b]\napp = echo\n", "pool [b]: listen is not set"},
             {"pool twice", two, two, "pool [a] is defined twice"},
             {"over the total", "max-workers-total = 3\nworkers = 2\n" + two,
              pool_section("b", "app = echo\n"),
              "max-workers-total: the pools may have 4 workers together (b 2, a 2), over 3"},
             {"a global line in an included file", two, "workers = 2\n",
              "pools.d/x.conf:1: workers outside any [pool] section"}}) {
      CAPTURE(k.name);
      it::RunResult r = it::run_host(
          {{"--config", "{dir}/main.conf", "--test-config"},
           {{"main.conf", "include = pools.d/*.conf\n" + k.main}, {"pools.d/x.conf", k.pool_file}},
           it::Listen::AsGiven,
           false},
          kPoolWait);
      CHECK(r.status == 2);
      CHECK_MESSAGE(r.output.find(k.error) != std::string::npos, r.output);
    }
  }
}

TEST_SUITE("pools") {

  TEST_CASE(
      "the master of the pools: one status page with a pool label, reload and scale of one pool") {
    Pools p({{"main.conf", "workers = 1\nstatus-listen = unix:{dir}/status.sock\n" +
                               pool_section("a", "app = echo\n") +
                               pool_section("b", "app = hello\nworkers = 2\n")}});
    p.wait_serving({"a", "b"});
    const std::string status = " --connect unix:" + p.host.dir().file("status.sock");
    // OpenMetrics over every pool: one family each, a pool label on every series, valid for
    // Prometheus's own parser.
    it::Command om = it::run_binary("status" + status + " --openmetrics");
    REQUIRE_MESSAGE(om.status == 0, om.output);
    CHECK(om.output.find("fcgihost_up{pool=\"a\"} 1") != std::string::npos);
    CHECK(om.output.find("fcgihost_up{pool=\"b\"} 1") != std::string::npos);
    std::string parsed =
        it::parse_openmetrics(p.host.dir(), om.output, "fcgihost_idle_processes{pool=\"b\"}");
    INFO(parsed);
    CHECK(parsed.find("VALUE 2") != std::string::npos);
    CHECK(parsed.find("EXIT") == std::string::npos);
    it::Command json = it::run_binary("status" + status + " --json");
    CHECK(json.output.starts_with("{\"pools\":{\"a\":{\"pool\":\"a\""));
    CHECK(json.output.find("\"b\":{\"pool\":\"b\"") != std::string::npos);
    // One pool by name: the others are left out.
    fcgi_test::Client c = fcgi_test::Client::connect(p.host.dir().file("status.sock"));
    fcgi_test::Response one = c.request("GET", "/status?openmetrics&pool=b");
    CHECK(one.body.find("pool=\"b\"") != std::string::npos);
    CHECK(one.body.find("pool=\"a\"") == std::string::npos);
    // Control verbs are POSTs from the master's user.
    fcgi_test::Client get = fcgi_test::Client::connect(p.host.dir().file("status.sock"));
    CHECK(get.request("GET", "/control/scale?pool=b&workers=3").status == 405);

    const pid_t master = p.host.pid();
    std::vector<pid_t> a = pool_workers(master, "a", 1), b = pool_workers(master, "b", 2);
    it::Command scale = it::run_binary("scale b 3" + status);
    CHECK_MESSAGE(scale.status == 0, scale.output);
    CHECK(pool_workers(master, "b", 3).size() == 3);
    CHECK(pool_workers(master, "a", 1) == a);
    CHECK(it::run_binary("scale nosuch 3" + status).status == 1);

    it::Command reload = it::run_binary("reload a" + status);
    CHECK_MESSAGE(reload.status == 0, reload.output);
    CHECK(it::wait_for(
        [&] {
          std::vector<pid_t> now = pool_workers(master, "a", 1);
          return now.size() == 1 && now != a;
        },
        kPoolWait));
    CHECK(pool_workers(master, "b", 3).size() == 3);
  }
}
