// Scale-out: three fcgi-host instances on 127.0.0.2, .3 and .4 behind one nginx upstream (TCP,
// kept connections, fastcgi_next_upstream error timeout), as conf/nginx-upstream-cluster.conf
// recommends. Under load, one instance is stopped gracefully (TERM: no request may fail), another
// is killed with SIGKILL, master and workers at once, as a crashed machine would be (only the
// requests in flight on it may fail, and nginx retries those GETs elsewhere); both are restarted
// and must take traffic again.
#include "checks.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <csignal>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <unistd.h>

using fcgi_test::Millis;
using it::HostProcess;
using Clock = std::chrono::steady_clock;

namespace {

constexpr int kClients = 4;        // client threads; each has at most one request in flight
constexpr int kDelayMs = 20;       // echo's delay_ms: requests are in flight long enough to be hit
constexpr int kPhaseRequests = 40; // answers each phase carries before the next one starts
constexpr Millis kPhaseBound{15000}; // ... within this bound
constexpr Millis kLoadBudget{40000}; // hard stop for the load threads, whatever happens

// nginx with an upstream of `servers`, as the cluster recipe has it, but fail_timeout 1s (10s in
// the recipe) so that a restarted instance is tried again soon.
it::NginxOptions cluster_nginx(const std::vector<std::string>& servers) {
  it::NginxOptions o;
  o.upstream = "  upstream cluster {\n";
  for (const auto& s : servers)
    o.upstream += "    server " + s + " max_fails=1 fail_timeout=1s;\n";
  o.upstream += "    keepalive 16;\n    keepalive_timeout 60s;\n  }\n";
  o.location = "      include /etc/nginx/fastcgi_params;\n"
               "      fastcgi_pass cluster;\n"
               "      fastcgi_keep_conn on;\n"
               "      fastcgi_connect_timeout 2s;\n"
               "      fastcgi_read_timeout 10s;\n"
               "      fastcgi_next_upstream error timeout;\n"
               "      fastcgi_next_upstream_tries 3;\n"
               "      fastcgi_next_upstream_timeout 10s;\n"
               "      add_header X-Upstream $upstream_addr always;\n";
  return o;
}

// Requests and failures while the load runs, by phase (the phase at the time a request ended),
// and which upstream answered (the last address in X-Upstream: nginx lists every one it tried).
enum Phase { Warmup, Graceful, Killed, Restarted, kPhases };
const char* const kPhaseNames[kPhases] = {"warm-up", "graceful stop", "kill -9", "restarted"};

struct Tally {
  std::mutex m;
  std::array<int, kPhases> ok{}, failed{};
  std::array<std::map<std::string, int>, kPhases> by_upstream;
  std::vector<std::string> failures; // the first few, for the report
};

void load_thread(int port, const std::atomic<int>& phase, const std::atomic<bool>& stop,
                 Tally& tally, int id) {
  auto deadline = Clock::now() + kLoadBudget;
  for (int n = 0; !stop && Clock::now() < deadline; ++n) {
    std::string target = "/echo?delay_ms=" + std::to_string(kDelayMs) + "&c=" + std::to_string(id) +
                         "." + std::to_string(n);
    std::string error, upstream;
    try {
      it::HttpResponse r = it::http_request(port, "GET", target, {}, Millis{10000});
      upstream = r.header("X-Upstream").value_or("");
      if (auto comma = upstream.rfind(", "); comma != std::string::npos)
        upstream = upstream.substr(comma + 2);
      if (r.status != 200 || r.body.find("uri=" + target + "\n") == std::string::npos)
        error = "status " + std::to_string(r.status) + " via " + upstream;
    } catch (const std::exception& e) {
      error = e.what();
    }
    int p = phase.load();
    std::lock_guard lock(tally.m);
    if (error.empty()) {
      ++tally.ok[p];
      ++tally.by_upstream[p][upstream];
    } else {
      ++tally.failed[p];
      if (tally.failures.size() < 10)
        tally.failures.push_back(std::string(kPhaseNames[p]) + ": " + error);
    }
  }
}

std::vector<std::string> host_args(const std::string& address) {
  return {"--listen", address, "--app", "echo", "--workers", "2", "--graceful-timeout", "10"};
}

std::unique_ptr<HostProcess> start_host(const std::string& address) {
  return std::make_unique<HostProcess>(
      it::HostOptions{host_args(address), {}, it::Listen::AsGiven});
}

// The instance's own count of the requests it served: the master logs each worker's count from
// the scoreboard when it exits ("worker P (gen G, slot S) exited ... after T s, N requests").
std::size_t requests_served(const HostProcess& host) {
  std::size_t total = 0;
  for (const auto& line : it::lines_with(host.log(), " requests")) {
    if (line.find("exited") == std::string::npos) continue;
    auto end = line.find(" requests");
    auto start = line.rfind(' ', end - 1);
    if (start != std::string::npos && end > start + 1)
      total += std::stoul(line.substr(start + 1, end - start - 1));
  }
  return total;
}

} // namespace

TEST_SUITE("scale out") {

  TEST_CASE("three hosts behind one nginx upstream: TERM loses nothing, kill -9 only what was "
            "in flight, restarted hosts take traffic again") {
    const std::string port = std::to_string(it::free_tcp_port());
    const std::array<std::string, 3> addr = {"127.0.0.2:" + port, "127.0.0.3:" + port,
                                             "127.0.0.4:" + port};
    std::array<std::unique_ptr<HostProcess>, 3> host;
    for (int i = 0; i < 3; ++i)
      host[i] = start_host(addr[i]);
    it::NginxProcess nginx(cluster_nginx({addr.begin(), addr.end()}));

    Tally tally;
    std::atomic<int> phase{Warmup};
    std::atomic<bool> stop{false};
    std::vector<std::thread> clients;
    for (int c = 0; c < kClients; ++c)
      clients.emplace_back(load_thread, nginx.port(), std::cref(phase), std::cref(stop),
                           std::ref(tally), c);
    // Whatever a CHECK below does, the clients stop and are joined.
    struct Joiner {
      std::atomic<bool>& stop;
      std::vector<std::thread>& threads;
      ~Joiner() {
        stop = true;
        for (auto& t : threads)
          if (t.joinable()) t.join();
      }
    } joiner{stop, clients};
    // The current phase has carried kPhaseRequests answers (and `also` holds).
    auto phase_carried = [&](Phase p, auto also) {
      return it::wait_for(
          [&] {
            std::lock_guard lock(tally.m);
            return tally.ok[p] >= kPhaseRequests && also();
          },
          kPhaseBound);
    };
    auto nothing_more = [] { return true; };

    CHECK(phase_carried(Warmup, [&] {
      return std::all_of(addr.begin(), addr.end(),
                         [&](const std::string& a) { return tally.by_upstream[Warmup][a] > 0; });
    }));

    // Graceful stop of 127.0.0.3: it finishes what it accepted; nginx finds it closed and moves on.
    phase = Graceful;
    host[1]->signal(SIGTERM);
    std::optional<int> term_status = host[1]->wait_exit(Millis{15000});
    CHECK(phase_carried(Graceful, nothing_more));

    // 127.0.0.4 dies at once, master and workers (one process group): a crashed machine.
    std::vector<pid_t> killed = it::pids_in_group(host[2]->pid());
    ::kill(-host[2]->pid(), SIGKILL);
    phase = Killed;
    std::optional<int> kill_status = host[2]->wait_exit(Millis{5000});
    bool group_gone =
        it::wait_for([&] { return it::pids_in_group(host[2]->pid()).empty(); }, Millis{5000});
    CHECK(phase_carried(Killed, nothing_more));

    // Both come back on the same addresses. nginx tries them again after fail_timeout (1 s).
    phase = Restarted;
    host[1] = start_host(addr[1]);
    host[2] = start_host(addr[2]);
    auto restarted_served = [&] {
      std::lock_guard lock(tally.m);
      return tally.by_upstream[Restarted][addr[1]] >= 5 &&
             tally.by_upstream[Restarted][addr[2]] >= 5;
    };
    bool back = it::wait_for(restarted_served, Millis{15000});
    CHECK(phase_carried(Restarted, nothing_more));
    stop = true;
    for (auto& t : clients)
      t.join();

    // The hosts' own counts, logged by each master as its workers exit.
    std::array<std::size_t, 3> served{};
    for (int i = 0; i < 3; ++i) {
      host[i]->signal(SIGTERM);
      CHECK(host[i]->wait_exit(Millis{15000}) == 0);
      served[i] = requests_served(*host[i]);
    }

    std::string nginx_log = nginx.error_log();
    // nginx logs each request it had to take away from a host: refused at connect (stopped or
    // dead), or lost after it was sent (in flight on the killed host, or sent on a kept
    // connection at the moment it was closed).
    std::size_t refused = 0;
    for (const auto& line : it::lines_with(nginx_log, "while connecting to upstream"))
      refused += line.find("[error]") != std::string::npos;
    std::size_t lost_in_flight = 0;
    for (const auto& line :
         it::lines_with(nginx_log, "while reading response header from upstream"))
      lost_in_flight += line.find("[error]") != std::string::npos;
    std::ostringstream report;
    for (int p = 0; p < kPhases; ++p) {
      report << kPhaseNames[p] << ": ok " << tally.ok[p] << ", failed " << tally.failed[p]
             << ", by instance:";
      for (const auto& [a, n] : tally.by_upstream[p])
        report << " " << a << "=" << n;
      report << "\n";
    }
    report << "after restart, the hosts' own counts (master log): " << addr[0] << "=" << served[0]
           << " " << addr[1] << "=" << served[1] << " " << addr[2] << "=" << served[2] << "\n";
    report << "nginx: " << refused << " connects refused, " << lost_in_flight
           << " requests lost in flight and retried elsewhere\n";
    for (const auto& f : tally.failures)
      report << "  failure " << f << "\n";
    MESSAGE(report.str());
    INFO(report.str());
    INFO("nginx error log:\n" << nginx_log);

    CHECK(term_status == 0);
    CHECK(kill_status == 128 + SIGKILL);
    CHECK(group_gone);
    CHECK(killed.size() >= 3); // the master and its two workers were all hit
    // Every phase carried real load.
    for (int p = 0; p < kPhases; ++p)
      CHECK(tally.ok[p] > 20);
    CHECK(tally.failed[Warmup] == 0);
    // TERM: nothing lost.
    CHECK(tally.failed[Graceful] == 0);
    // kill -9: at most the requests that were in flight on the killed host, and no more than one
    // per client (each client has one request outstanding); nginx retries GETs elsewhere, so
    // usually none reach the client at all.
    CHECK(tally.failed[Killed] <= kClients);
    CHECK(tally.failed[Restarted] == 0);
    // Before the stops every instance served; after the restart both restarted ones serve again.
    for (const auto& a : addr)
      CHECK(tally.by_upstream[Warmup][a] > 0);
    CHECK(back);
    CHECK(served[1] >= 5);
    CHECK(served[2] >= 5);
    // The hosts' own counts agree with nginx's, request for request (no client failed while the
    // restarted hosts ran, and 127.0.0.2 ran throughout).
    CHECK(served[1] == std::size_t(tally.by_upstream[Restarted][addr[1]]));
    CHECK(served[2] == std::size_t(tally.by_upstream[Restarted][addr[2]]));
    std::size_t first_total = 0;
    for (int p = 0; p < kPhases; ++p)
      first_total += tally.by_upstream[p][addr[0]];
    CHECK(served[0] == first_total);
    // While stopped or dead, they got nothing: the stopped one none at all; the killed one at most
    // the answers that were on their way when the phase switched (one per client).
    CHECK(tally.by_upstream[Killed][addr[1]] == 0);
    CHECK(tally.by_upstream[Killed][addr[2]] <= kClients);
    CHECK(it::lines_with(nginx_log, "[alert]").empty());
  }

} // TEST_SUITE
