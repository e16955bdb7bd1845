// The --exec relay (--script-root) on the house's parts: the client's requests are framed by the
// record guard with a plugin worker's limits (the same refusal, byte for byte, and the same log
// line), each relayed request is published in the worker's slot (the status page sees it), and
// TERM lets the request in flight finish before the worker stops. With php-cgi as the program.
#include "checks.hpp"
#include "support/skip.hpp"

#include <csignal>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

using fcgi_test::Client;
using fcgi_test::IoStatus;
using fcgi_test::Millis;
using fcgi_test::Params;
using fcgi_test::RecordType;
using it::HostOptions;
using it::HostProcess;

namespace {

constexpr Millis kRelayWait{5000};

bool php_cgi_present() {
  if (::access("/usr/bin/php-cgi", X_OK) == 0) return true;
  test_support::skip("php-cgi not installed (apt-get install php8.2-cgi)");
  return false;
}

// A site the workers' user can read: root/hello.php answers "hello".
struct RelaySite {
  it::TempDir dir;
  std::string hello;
  RelaySite() {
    REQUIRE(::chmod(dir.path().c_str(), 0755) == 0);
    hello = dir.write("root/hello.php", "<?php echo 'hello';");
  }
  // A FIFO the workers' user may open (its reader blocks until a writer opens it).
  std::string fifo(const std::string& name) const {
    const std::string path = dir.file(name);
    REQUIRE(::mkfifo(path.c_str(), 0600) == 0);
    REQUIRE(::chmod(path.c_str(), 0666) == 0);
    return path;
  }
  std::vector<std::string> relay_args(std::vector<std::string> extra = {}) const {
    std::vector<std::string> args = {"--workers", "1", "--script-root", dir.file("root")};
    args.insert(args.end(), extra.begin(), extra.end());
    args.insert(args.end(), {"--exec", "/usr/bin/php-cgi"});
    return args;
  }
};

std::string relay_request_bytes(std::uint16_t id, const Params& params, std::string_view body) {
  return fcgi_test::encode_record(RecordType::BeginRequest, id,
                                  fcgi_test::begin_request_body(fcgi_test::Role::Responder, 0)) +
         fcgi_test::encode_stream(RecordType::Params, id, fcgi_test::encode_params(params)) +
         fcgi_test::encode_stream(RecordType::Stdin, id, body);
}

// What the host answers `bytes` with, up to its close.
std::string answer_to(const HostProcess& host, const std::string& bytes) {
  Client c = host.connect(kRelayWait);
  c.send_raw(bytes);
  fcgi_test::ReadAllResult all = c.read_until_closed(kRelayWait);
  CHECK(all.status == IoStatus::Closed);
  return all.data;
}

std::string relayed_get(const HostProcess& host, const std::string& script) {
  fcgi_test::Response r =
      host.connect(kRelayWait).request("GET", "/x.php", {}, {{"SCRIPT_FILENAME", script}});
  INFO(script << " answered " << r.status << ": " << r.body);
  CHECK(r.status == 200);
  return r.body;
}

} // namespace

TEST_SUITE("script relay") {

  TEST_CASE("the relay refuses what a plugin worker refuses: the same answer, the same line, and "
            "1 MiB of params does not grow it") {
    if (!php_cgi_present()) return;
    RelaySite site;
    const std::vector<std::string> limits = {"--max-params", "64",         "--max-params-size",
                                             "4K",           "--max-body", "64K"};
    std::vector<std::string> plugin_args = {"--app", "echo", "--workers", "1"};
    plugin_args.insert(plugin_args.end(), limits.begin(), limits.end());
    HostProcess plugin(plugin_args);
    HostProcess relay(site.relay_args(limits));
    for (HostProcess* host : {&plugin, &relay})
      host->expect_log("request refused with 4");
    CHECK(relayed_get(relay, site.hello) == "hello");
    const std::vector<pid_t> workers = relay.wait_workers(1);
    REQUIRE(workers.size() == 1);
    long rss_before = 0;

    Params script = {{"SCRIPT_FILENAME", site.hello}};
    Params many = fcgi_test::standard_params("GET", "/x.php", 0);
    many.insert(many.end(), script.begin(), script.end());
    for (int i = 0; i < 64; ++i)
      many.emplace_back("HTTP_X_" + std::to_string(i), "v");
    Params big = fcgi_test::standard_params("GET", "/x.php", 0);
    big.emplace_back("HTTP_BIG", std::string(1 << 20, 'v'));
    Params over_body = fcgi_test::standard_params("POST", "/x.php", 70000);
    over_body.insert(over_body.end(), script.begin(), script.end());
    // Refused in its first STDIN record, after the program has begun the request: a script that
    // reads its body, so that the program answers only once the relay has ended it.
    const std::string reader =
        site.dir.write("root/read.php", "<?php echo strlen(file_get_contents('php://input'));");
    Params longer = fcgi_test::standard_params("POST", "/x.php", 60000);
    longer.emplace_back("SCRIPT_FILENAME", reader);
    struct Case {
      const char* what;
      std::string bytes;
      std::string line;
    };
    for (const Case& k :
         {Case{"more than --max-params", relay_request_bytes(1, many, ""),
               "request refused with 400: more than 64 FastCGI params"},
          Case{"a body declared over --max-body", relay_request_bytes(1, over_body, ""),
               "request refused with 413: CONTENT_LENGTH 70000 is over --max-body"},
          Case{"a body longer than its CONTENT_LENGTH (the program has begun it)",
               relay_request_bytes(1, longer, std::string(70000, 'b')),
               "request refused with 400: a body longer than CONTENT_LENGTH 60000"},
          Case{"1 MiB of params", relay_request_bytes(1, big, ""),
               "request refused with 400: FastCGI params over --max-params-size"}}) {
      CAPTURE(k.what);
      const std::string refused = answer_to(plugin, k.bytes);
      CHECK(refused.find("Status: 4") != std::string::npos);
      rss_before = it::rss_kib(workers[0]); // the last case's: the megabyte
      CHECK(answer_to(relay, k.bytes) == refused);
      CHECK(plugin.wait_log(k.line));
      CHECK(relay.wait_log(k.line));
    }
    // The relay still serves, in the same worker, and held none of the megabyte.
    CHECK(relayed_get(relay, site.hello) == "hello");
    CHECK(relay.worker_pids() == workers);
    const long rss_after = it::rss_kib(workers[0]);
    // Held as params, then copied for the program, the megabyte would count twice here.
    INFO("relay RSS " << rss_before << " KiB, then " << rss_after << " KiB");
    CHECK(rss_after - rss_before < 512);
  }

  TEST_CASE("a relayed request shows on the status page, and TERM lets it finish first") {
    if (!php_cgi_present()) return;
    RelaySite site;
    // The script waits in the open of a FIFO until the test opens its other end, so the request
    // is in flight for as long as the test needs.
    const std::string go = site.fifo("go");
    const std::string wait =
        site.dir.write("root/wait.php", "<?php echo file_get_contents('" + go +
                                            "') === 'go' ? 'released' : 'never released';");
    HostOptions options;
    options.args = site.relay_args();
    options.status_socket = true;
    HostProcess host(options);
    // The program's first answer makes the worker ready; its requests are published from then.
    CHECK(relayed_get(host, site.hello) == "hello");

    Client c = host.connect(kRelayWait);
    fcgi_test::Request slow;
    slow.uri = "/wait.php";
    slow.extra_params = {{"SCRIPT_FILENAME", wait}};
    const std::uint16_t id = c.send_request(slow);
    REQUIRE(host.wait_serving("/wait.php", kRelayWait));
    CHECK(host.status_json(true).find("\"request method\":\"GET\"") != std::string::npos);

    host.signal(SIGTERM);
    // The master has passed the TERM on before the script is released.
    REQUIRE(host.wait_master_turn(kRelayWait));
    CHECK_FALSE(host.exited());
    // The script is in the FIFO's open (its request is in flight): a writer's open meets it.
    int writer = -1;
    REQUIRE(it::wait_for(
        [&] { return (writer = ::open(go.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC)) >= 0; },
        kRelayWait));
    REQUIRE(::write(writer, "go", 2) == 2);
    ::close(writer);
    fcgi_test::Response r = c.read_response(id);
    CHECK(r.status == 200);
    CHECK(r.body == "released");
    CHECK(c.read_until_closed(kRelayWait).status == IoStatus::Closed);
    CHECK(host.wait_exit(Millis{10000}) == 0);
  }

  TEST_CASE("--request-timeout ends a relayed request that runs past it, named in the line") {
    if (!php_cgi_present()) return;
    RelaySite site;
    // Hung: the open of a FIFO nobody ever writes to blocks until the worker is killed.
    const std::string hang = site.dir.write(
        "root/hang.php", "<?php file_get_contents('" + site.fifo("never") + "'); echo 'late';");
    HostProcess host(site.relay_args({"--request-timeout", "1"}));
    CHECK(relayed_get(host, site.hello) == "hello");
    const std::vector<pid_t> workers = host.wait_workers(1);
    REQUIRE(workers.size() == 1);
    Client c = host.connect(kRelayWait);
    c.set_timeout(Millis{10000});
    fcgi_test::Response r = c.request("GET", "/hang.php", {}, {{"SCRIPT_FILENAME", hang}});
    CHECK_FALSE(r.ended); // the worker was killed: no answer, the connection closed
    REQUIRE(host.wait_log(": request \"GET /hang.php\", request id .* past --request-timeout "
                          "\\(1.0 s\\): the worker is killed",
                          kRelayWait));
    CHECK(host.wait_worker_replaced(workers[0], 1).size() == 1);
    CHECK(relayed_get(host, site.hello) == "hello");
  }
}
