// The shipped autoscaler, against a real Prometheus: Debian's prometheus (2.42) started as a plain
// process on a free loopback port, scraping the host's health port every second, answers the two
// queries of conf/kubernetes/autoscaling/keda/scaledobject.yaml (read from the file, as shipped).
// Under a load that keeps the only worker busy with requests waiting behind nginx, each rises
// above its threshold; after the load, each falls back under it. And the kustomizations render.
#include "commands.hpp"
#include "harness.hpp"
#include "lifecycle_load.hpp"
#include "support/skip.hpp"

#include <csignal>
#include <doctest/doctest.h>
#include <fstream>
#include <sstream>
#include <sys/stat.h>

#ifndef FCGI_HOST_SOURCE_DIR
#define FCGI_HOST_SOURCE_DIR "."
#endif

using it::HostProcess;
using Millis = std::chrono::milliseconds;

namespace {

const char* const kPrometheus = "/usr/bin/prometheus";

struct Trigger {
  std::string query;
  double threshold = 0;
};

// The `query: '…'` and `threshold: '…'` lines of the ScaledObject, in order.
std::vector<Trigger> shipped_triggers() {
  std::ifstream in(std::string(FCGI_HOST_SOURCE_DIR) +
                   "/conf/kubernetes/autoscaling/keda/scaledobject.yaml");
  std::vector<Trigger> triggers;
  auto quoted = [](const std::string& line, const std::string& key) -> std::optional<std::string> {
    const std::string prefix = key + ": '";
    const auto at = line.find(prefix);
    if (at == std::string::npos || line.find_first_not_of(' ') != at) return std::nullopt;
    const auto end = line.rfind('\'');
    return line.substr(at + prefix.size(), end - at - prefix.size());
  };
  for (std::string line; std::getline(in, line);) {
    if (auto q = quoted(line, "query")) triggers.push_back({*q, 0});
    if (auto t = quoted(line, "threshold"); t && !triggers.empty())
      triggers.back().threshold = std::stod(*t);
  }
  return triggers;
}

std::string url_encode(const std::string& text) {
  std::string out;
  char buf[4];
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '_' || c == '.' || c == '~') {
      out += static_cast<char>(c);
    } else {
      std::snprintf(buf, sizeof buf, "%%%02X", c);
      out += buf;
    }
  }
  return out;
}

// A Prometheus of the test's own: one job scraping `target` every second.
class Prometheus {
public:
  Prometheus(const it::TempDir& dir, int target) : port_(it::free_tcp_port()) {
    dir.write("prometheus.yml", "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                                "scrape_configs:\n  - job_name: fcgi-host\n    static_configs:\n"
                                "      - targets: ['127.0.0.1:" +
                                    std::to_string(target) + "']\n");
    const std::string log = dir.file("prometheus.log");
    server_ = std::make_unique<it::ServerProcess>(
        "prometheus",
        std::vector<std::string>{kPrometheus, "--config.file=" + dir.file("prometheus.yml"),
                                 "--storage.tsdb.path=" + dir.file("tsdb"),
                                 "--web.listen-address=127.0.0.1:" + std::to_string(port_)},
        log, dir.path(), port_, SIGTERM, [log] { return it::read_file(log); });
  }
  // The query's one value now; nullopt when it has none (or Prometheus is not ready yet).
  std::optional<double> value(const std::string& query) const {
    try {
      it::HttpResponse r = it::http_request(
          port_, "GET", "/api/v1/query?query=" + url_encode(query), {}, Millis{3000});
      const auto at = r.body.find("\"value\":[");
      if (r.status != 200 || at == std::string::npos) return std::nullopt;
      const auto quote = r.body.find('"', r.body.find(',', at));
      return std::stod(r.body.substr(quote + 1));
    } catch (const std::exception&) {
      return std::nullopt;
    }
  }

private:
  int port_;
  std::unique_ptr<it::ServerProcess> server_;
};

bool installed(const char* path) {
  struct stat st {};
  return ::stat(path, &st) == 0;
}

} // namespace

TEST_SUITE("autoscaling") {

  TEST_CASE("autoscaling: the shipped ScaledObject's queries rise over their thresholds under "
            "load and fall back after it, in a real Prometheus") {
    if (!installed(kPrometheus))
      return test_support::skip("prometheus is not installed (scripts/test.sh installs it)");
    const std::vector<Trigger> triggers = shipped_triggers();
    REQUIRE(triggers.size() == 2);
    for (const Trigger& t : triggers) {
      INFO(t.query);
      REQUIRE(t.threshold > 0);
    }
    const int health = it::free_tcp_port();
    HostProcess host({"--app", "echo", "--workers", "1", "--health-listen",
                      "127.0.0.1:" + std::to_string(health), "--health-allow", "127.0.0.1"});
    it::NginxProcess nginx({host.address()}); // stamps X-Request-Start, as the pod's nginx does
    Prometheus prometheus(host.dir(), health);
    auto all = [&](auto holds) {
      for (const Trigger& t : triggers) {
        const std::optional<double> v = prometheus.value(t.query);
        if (!v || !holds(*v, t.threshold)) return false;
      }
      return true;
    };
    auto under = [](double v, double threshold) { return v < threshold; };
    auto over = [](double v, double threshold) { return v > threshold; };
    // Idle: both answer (0, not an empty result), under their thresholds.
    REQUIRE(it::wait_for([&] { return all(under); }, Millis{15000}));

    // Six clients on one worker whose handler takes 40 ms: always busy, five waiting.
    it::HttpLoad load(nginx.port(), "/echo?delay_ms=40", 6);
    const bool rose = it::wait_for([&] { return all(over); }, Millis{20000});
    for (const Trigger& t : triggers)
      MESSAGE("under load: " << prometheus.value(t.query).value_or(-1) << " for threshold "
                             << t.threshold << ": " << t.query);
    CHECK(rose);
    load.stop();
    CHECK(load.failures() == 0);
    // The windows are 30 s: the load leaves them within that.
    CHECK(it::wait_for([&] { return all(under); }, Millis{45000}));
  }

  TEST_CASE("autoscaling: conf/kubernetes and both autoscaler variants render with kubectl "
            "kustomize") {
    if (!installed("/usr/bin/kubectl"))
      return test_support::skip("kubectl is not installed (scripts/test.sh installs Debian's "
                                "kubernetes-client)");
    const std::string conf = std::string(FCGI_HOST_SOURCE_DIR) + "/conf/kubernetes";
    const std::pair<const char*, const char*> kinds[] = {
        {"", "kind: Deployment"},
        {"/autoscaling/keda", "kind: ScaledObject"},
        {"/autoscaling/hpa", "kind: HorizontalPodAutoscaler"}};
    for (auto [dir, kind] : kinds) {
      it::Command c = it::run_shell("timeout 60 kubectl kustomize " + conf + dir);
      INFO(dir << ": " << c.output);
      CHECK(c.status == 0);
      CHECK(c.output.find(kind) != std::string::npos);
    }
  }
}
