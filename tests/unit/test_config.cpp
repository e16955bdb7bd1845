// Options and config file: defaults, file vs command line, and refusals that name the option.
#include "fcgi_host/cli/config.hpp"
#include "fcgi_host/cli/settings_from_config.hpp"
#include "fcgi_host/cli/start_checks.hpp"
#include "fcgi_host/runners/exec_worker.hpp"

#include <doctest/doctest.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

using fcgi_host::Config;
using fcgi_host::ConfigError;
using fcgi_host::ListenAddress;
using fcgi_host::parse_config;
using fcgi_host::ParseOutcome;

namespace {

Config parse(std::vector<std::string> args) {
  args.insert(args.begin(), "fcgi-host");
  std::vector<const char*> argv;
  for (auto& a : args)
    argv.push_back(a.c_str());
  Config c;
  std::ostringstream out;
  parse_config(static_cast<int>(argv.size()), argv.data(), c, out);
  return c;
}

std::string error_of(std::vector<std::string> args) {
  try {
    parse(std::move(args));
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "";
}

// A config file in a temporary directory, removed at the end of the test.
struct TempConfig {
  std::string path;
  explicit TempConfig(const std::string& text) {
    char tmpl[] = "/tmp/fcgi-host-config-XXXXXX";
    int fd = mkstemp(tmpl);
    REQUIRE(fd >= 0);
    close(fd);
    path = tmpl;
    std::ofstream(path) << text;
  }
  ~TempConfig() { std::remove(path.c_str()); }
};

} // namespace

TEST_CASE("defaults") {
  Config c = parse({});
  CHECK(c.workers == fcgi_host::default_worker_count());
  CHECK(c.app == "hello");
  CHECK(c.listen.kind == ListenAddress::Kind::Inherited);
  CHECK(c.limits.request.max_body == 8u << 20);
  CHECK(c.socket_mode == 0660);
  CHECK(c.graceful_timeout.count() == 30'000);
  CHECK(c.request_timeout.count() == 0);
}

TEST_CASE("listen addresses") {
  CHECK(parse({"--listen", "unix:/run/x.sock"}).listen.path == "/run/x.sock");
  CHECK(parse({"--listen", "/run/y.sock"}).listen.kind == ListenAddress::Kind::Unix);
  Config tcp = parse({"--listen", "127.0.0.1:9000"});
  CHECK(tcp.listen.kind == ListenAddress::Kind::Tcp);
  CHECK(tcp.listen.host == "127.0.0.1");
  CHECK(tcp.listen.port == 9000);
  Config v6 = parse({"--listen", "[::1]:9001"});
  CHECK(v6.listen.host == "::1");
  CHECK(v6.listen.to_string() == "[::1]:9001");
  Config any = parse({"--listen", ":9002"});
  CHECK(any.listen.host.empty());
  CHECK(any.listen.port == 9002);
  CHECK(error_of({"--listen", "nonsense"}).find("--listen") != std::string::npos);
  CHECK(error_of({"--listen", "host:0"}).find("port") != std::string::npos);
  CHECK(error_of({"--listen", "host:99999"}).find("port") != std::string::npos);
  CHECK(error_of({"--listen", "::1:80"}).find("brackets") != std::string::npos);
  CHECK(error_of({"--listen", "/" + std::string(200, 'a')}).find("longer") != std::string::npos);
}

TEST_CASE("bad values name the option") {
  CHECK(error_of({"--workers", "0"}).find("--workers") != std::string::npos);
  CHECK(error_of({"--workers", "abc"}).find("workers") != std::string::npos);
  CHECK(error_of({"--bogus"}).find("bogus") != std::string::npos);
  CHECK(error_of({"--work", "2"}).find("work") != std::string::npos); // no guessing
  CHECK(error_of({"--max-body", "12Q"}).find("--max-body") != std::string::npos);
  CHECK(error_of({"--socket-mode", "0999"}).find("--socket-mode") != std::string::npos);
  CHECK(error_of({"--graceful-timeout", "-1"}).find("--graceful-timeout") != std::string::npos);
  CHECK(error_of({"--header-timeout", "0"}).find("--header-timeout") != std::string::npos);
  CHECK(error_of({"--log-level", "loud"}).find("--log-level") != std::string::npos);
  // An empty allow-list would allow everyone: refused, on the command line and in a file.
  for (const char* list : {"--allow-clients", "--status-allow"})
    for (const char* empty : {"", " , "})
      CHECK(error_of({list, empty}).find(list) != std::string::npos);
  TempConfig file("allow-clients = ,\n");
  CHECK(error_of({"--config", file.path}).find("allow-clients") != std::string::npos);
  CHECK(error_of({"--status-allow", "010.0.0.1"}).find("--status-allow") != std::string::npos);
}

TEST_CASE("sizes and durations") {
  Config c = parse({"--max-body", "2K", "--request-timeout", "1.5", "--max-params-size", "1M"});
  CHECK(c.limits.request.max_body == 2048);
  CHECK(c.limits.request.max_params_size == 1u << 20);
  CHECK(c.request_timeout.count() == 1500);
}

TEST_CASE("config file values, and the command line wins") {
  TempConfig file("# comment\n"
                  "workers = 3\n"
                  "; another comment\n"
                  "   app = echo   \n"
                  "listen = \"unix:/tmp/from-file.sock\"\n");
  Config c = parse({"--config", file.path});
  CHECK(c.workers == 3);
  CHECK(c.app == "echo");
  CHECK(c.listen.path == "/tmp/from-file.sock");
  Config overridden = parse({"--config", file.path, "--workers", "5"});
  CHECK(overridden.workers == 5);
  CHECK(overridden.app == "echo");
}

TEST_CASE("config file errors give file:line") {
  TempConfig unknown("workers = 2\nnot-an-option = 1\n");
  std::string e = error_of({"--config", unknown.path});
  CHECK(e.find(unknown.path + ":2") != std::string::npos);

  TempConfig bad_value("\nworkers = 0\n");
  e = error_of({"--config", bad_value.path});
  CHECK(e.find(bad_value.path + ":2: workers") != std::string::npos);

  TempConfig no_equals("workers 2\n");
  CHECK(error_of({"--config", no_equals.path}).find(no_equals.path + ":1") != std::string::npos);

  TempConfig twice("workers = 2\nworkers = 3\n");
  CHECK(error_of({"--config", twice.path}).find("twice") != std::string::npos);

  CHECK(error_of({"--config", "/nonexistent/fcgi-host.conf"}).find("cannot read") !=
        std::string::npos);
}

TEST_CASE("--help lists every option with its default and the signal table") {
  const char* argv[] = {"fcgi-host", "--help"};
  Config c;
  std::ostringstream out;
  CHECK(parse_config(2, argv, c, out) == ParseOutcome::Exit);
  std::string help = out.str();
  for (const char* word : {"--listen", "--workers", "--app", "--max-body", "--graceful-timeout",
                           "--config", "--test-config", "(=8M)", "HUP", "TTIN", "Exit codes"})
    CHECK_MESSAGE(help.find(word) != std::string::npos, word);
}

TEST_CASE("env repeats in the file as on the command line") {
  TempConfig file("env = A=1\nenv = B=2\n");
  Config c = parse({"--config", file.path});
  CHECK(c.env == std::vector<std::string>{"A=1", "B=2"});
  TempConfig twice("workers = 2\nworkers = 3\n");
  CHECK(error_of({"--config", twice.path}).find(":2: workers is given twice") != std::string::npos);
}

TEST_CASE("clear-env is on by default, off on the command line and in the file, old forms kept") {
  CHECK(parse({}).clear_env);
  CHECK(parse({"--clear-env"}).clear_env); // the switch it was
  CHECK_FALSE(parse({"--clear-env", "off"}).clear_env);
  CHECK_FALSE(parse({"--clear-env=off"}).clear_env);
  CHECK(parse({"--clear-env", "on"}).clear_env);
  for (const char* off : {"false", "no", "off", "0"}) {
    TempConfig file(std::string("clear-env = ") + off + "\n");
    CHECK_FALSE(parse({"--config", file.path}).clear_env);
  }
  for (const char* on : {"true", "yes", "on", "1"}) {
    TempConfig file(std::string("clear-env = ") + on + "\n");
    CHECK(parse({"--config", file.path}).clear_env);
  }
  CHECK(error_of({"--clear-env=maybe"}).find("--clear-env: must be on or off") !=
        std::string::npos);
  TempConfig bad("clear-env = maybe\n");
  CHECK(error_of({"--config", bad.path}).find(":1: clear-env takes on or off, not 'maybe'") !=
        std::string::npos);
}

TEST_CASE("--exec: every word after the program is the program's") {
  Config c = parse({"--workers", "2", "--exec", "/usr/bin/php-cgi", "-d", "display_errors=1"});
  CHECK(c.exec == std::vector<std::string>{"/usr/bin/php-cgi", "-d", "display_errors=1"});
  CHECK(c.workers == 2);
  Config dashed = parse({"--exec", "/bin/sh", "--", "-c", "true"});
  CHECK(dashed.exec == std::vector<std::string>{"/bin/sh", "-c", "true"});
  // A host option after the program would be the program's, and the host would run without
  // it: refused, unless `--` says the words are the program's.
  CHECK(error_of({"--exec", "/usr/bin/php-cgi", "--sandbox", "on"})
            .starts_with("'--sandbox' after --exec /usr/bin/php-cgi is an option of fcgi-host"));
  CHECK(error_of({"--exec", "php-cgi", "-d", "x=1", "--workers=3"})
            .starts_with("'--workers=3' after --exec php-cgi"));
  Config passed = parse({"--exec", "/bin/prog", "--", "--sandbox", "on", "--not-ours"});
  CHECK(passed.exec == std::vector<std::string>{"/bin/prog", "--sandbox", "on", "--not-ours"});
  CHECK(passed.sandbox == "off");
  CHECK(parse({"--exec", "/bin/prog", "--verbose"}).exec.size() == 2); // not a host option
  Config file_words = parse({"--exec=/bin/sh"});
  CHECK(file_words.exec == std::vector<std::string>{"/bin/sh"});
  CHECK(error_of({"--status-path", "/s", "--exec", "/bin/true"}).starts_with("--status-path: "));
  CHECK(error_of({"--app", "echo", "--exec", "/bin/true"}).starts_with("--app: "));
  CHECK(error_of({"stray"}).find("--exec PROGRAM") != std::string::npos);
}

TEST_CASE("responses: --max-response-head, --send-file-mode and --x-accel-prefix") {
  Config d = parse({});
  CHECK(d.max_response_head == 4096);
  CHECK(d.send_file_mode == "stream");
  CHECK(d.x_accel_prefix == "/internal");
  Config c = parse({"--max-response-head", "8K", "--send-file-mode", "x-accel-redirect",
                    "--x-accel-prefix", "/protected"});
  CHECK(c.max_response_head == 8192);
  CHECK(c.send_file_mode == "x-accel-redirect");
  CHECK(c.x_accel_prefix == "/protected");
  CHECK(parse({"--send-file-mode", "x-sendfile"}).send_file_mode == "x-sendfile");
  CHECK(error_of({"--send-file-mode", "sendfile"}).find("--send-file-mode") != std::string::npos);
  CHECK(error_of({"--x-accel-prefix", "internal"}).find("must start with /") != std::string::npos);
  CHECK(error_of({"--max-response-head", "100"}).find("at least 256") != std::string::npos);
}

// Status is closed by default (docs/security.md): the master's Unix status socket is its own
// user's, 0600 (0660 for the group given); a TCP listener needs its allow-list said; the status
// path answers loopback and local Unix clients unless told otherwise.
TEST_CASE("config: status is closed by default") {
  Config open_socket = parse(
      {"--socket-mode", "0666", "--socket-owner", "nobody", "--status-listen", "unix:/tmp/s.sock"});
  fcgi_host::ListenOptions status = fcgi_host::status_listen_options(open_socket);
  CHECK(status.mode == 0600);
  CHECK(status.owner.empty());
  Config grouped = parse({"--socket-group", "adm", "--status-listen", "unix:/tmp/s.sock"});
  CHECK(fcgi_host::status_listen_options(grouped).mode == 0660);
  CHECK(fcgi_host::status_listen_options(grouped).group == "adm");

  std::string why = error_of({"--status-listen", "127.0.0.1:9001"});
  CHECK(why.find("--status-listen") != std::string::npos);
  CHECK(why.find("--status-allow") != std::string::npos);
  CHECK(error_of({"--status-listen", "127.0.0.1:9001", "--status-allow", "127.0.0.1"}).empty());

  Config plain = parse({});
  CHECK(plain.status_allow == std::vector<std::string>{"127.0.0.0/8", "::1", "unix"});
  fcgi_host::ClientFilter filter = fcgi_host::observability_settings(plain).status_allow;
  CHECK_FALSE(filter.allows_everyone());
  CHECK(filter.allows_unix_clients());
}

// The one translator: each option reaches the struct of the room that acts on it.
TEST_CASE("config: the options reach each room's settings through the one translator") {
  Config c = parse({"--listen", "unix:/tmp/x.sock", "--socket-mode", "0600", "--status-listen",
                    "unix:/tmp/s.sock", "--max-queue-time", "250", "--max-body", "2K",
                    "--slow-request-threshold", "1.5", "--workers", "3", "--max-connections", "4"});
  fcgi_host::ListenOptions pool = fcgi_host::listen_options(c);
  CHECK(pool.address.path == "/tmp/x.sock");
  CHECK(pool.mode == 0600);
  fcgi_host::ListenOptions status = fcgi_host::status_listen_options(c);
  CHECK(status.address.path == "/tmp/s.sock");
  CHECK(status.mode == 0600); // the master's: owner-only
  CHECK(status.backlog == 64);
  CHECK(fcgi_host::admission_settings(c).max_queue_ns == 250'000'000u);
  CHECK(fcgi_host::observability_settings(c).slow_threshold_ns == 1'500'000'000u);
  fcgi_host::WorkerSettings w = fcgi_host::worker_settings(c, {5, -1, {}});
  CHECK(w.listen_fd == 5);
  CHECK(w.limits.request.max_body == 2048);
  CHECK(w.admission.max_queue_ns == 250'000'000u);
  CHECK(w.server_values.max_conns == 12);
  CHECK(fcgi_host::pool_settings(c, false).workers == 3);
}

TEST_CASE("settings: --handoff-after nudges only with a channel, --exec takes libfcgi's signals") {
  Config c = parse({"--handoff-after", "0.3"});
  CHECK(fcgi_host::pool_settings(c, true).nudge_after.count() == 300);
  CHECK(fcgi_host::pool_settings(c, false).nudge_after.count() == 0);
  process_manager::PoolSettings own = fcgi_host::pool_settings(c, true);
  CHECK(own.retire_signal == SIGQUIT);
  CHECK(own.boot_window.count() == 0); // the worker says it is ready
  process_manager::PoolSettings exec =
      fcgi_host::pool_settings(parse({"--handoff-after", "0.3", "--exec", "/bin/true"}), false);
  CHECK(exec.retire_signal == SIGTERM);
  CHECK(exec.reopen_logs_signal == 0);
  CHECK(exec.resend_stop_every.count() == 500);
  CHECK(exec.boot_window == fcgi_host::kExecBootWindow);
  CHECK(exec.nudge_after.count() == 0);
}

TEST_CASE("--capture-crashes: per pool in a config file, each pool its own file names") {
  TempConfig file("capture-max-files = 3\n"
                  "[www]\n"
                  "listen = /tmp/www.sock\n"
                  "capture-crashes = /var/tmp/\n"
                  "capture-redact = HTTP_X_SESSION*\n"
                  "capture-redact = *PIN*\n"
                  "[api]\n"
                  "listen = /tmp/api.sock\n"
                  "capture-body = off\n");
  Config www = parse({"--config", file.path, "--pool", "www"});
  fcgi_host::CaptureSettings s = fcgi_host::capture_settings(www);
  CHECK(s.dir == "/var/tmp"); // the block's file name gets one slash
  CHECK(s.file_prefix == "crash-www");
  CHECK(s.max_files == 3);
  CHECK(s.max_bytes == 1u << 20);
  CHECK(s.redact == std::vector<std::string>{"HTTP_X_SESSION*", "*PIN*"});
  CHECK(s.keep_body);
  Config api = parse({"--config", file.path, "--pool", "api"});
  CHECK(fcgi_host::capture_settings(api).dir.empty());
  CHECK_FALSE(fcgi_host::capture_settings(api).keep_body);
  CHECK(error_of({"--capture-crashes", "captures"}) ==
        "--capture-crashes: must be an absolute path (the crash block names the file)");
  CHECK(error_of({"--capture-max-bytes", "100"}) == "--capture-max-bytes: must be from 4K to 1G");
  CHECK(error_of({"--capture-body", "maybe"}) == "--capture-body: must be on or off");
  CHECK(error_of({"--capture-crashes", "/tmp", "--exec", "/bin/true"})
            .starts_with("--capture-crashes: not available with --exec"));
}

TEST_CASE("memory-max takes a size with K, M, G, or max, cpu-weight 1 to 10000") {
  CHECK(*parse({"--memory-max", "512M"}).memory_max == 512ull << 20);
  CHECK(*parse({"--memory-max", "2G"}).memory_max == 2ull << 30);
  CHECK(*parse({"--memory-max", "1048576"}).memory_max == 1ull << 20);
  CHECK(*parse({"--memory-max", "max"}).memory_max == Config::kUnlimited);
  CHECK_FALSE(parse({}).memory_max);
  CHECK_FALSE(parse({}).wants_cgroup());
  CHECK(error_of({"--memory-max", "lots"}).find("--memory-max") != std::string::npos);
  CHECK(error_of({"--memory-max", "512X"}).find("unknown suffix") != std::string::npos);
  CHECK(error_of({"--memory-max", "100K"}).find("at least 1M") != std::string::npos);
  CHECK(*parse({"--cpu-weight", "1"}).cpu_weight == 1);
  CHECK(*parse({"--cpu-weight", "10000"}).cpu_weight == 10000);
  CHECK(parse({"--cpu-weight", "200"}).wants_cgroup());
  CHECK(error_of({"--cpu-weight", "0"}).find("--cpu-weight") != std::string::npos);
  CHECK(error_of({"--cpu-weight", "10001"}).find("--cpu-weight") != std::string::npos);
}

TEST_CASE("one application refuses memory-max and cpu-weight: they are a pool's cgroup") {
  Config c = parse({"--memory-max", "64M", "--listen", "127.0.0.1:9"});
  try {
    fcgi_host::check_before_start(c);
    FAIL("memory-max accepted for one application");
  } catch (const ConfigError& e) {
    CHECK(std::string(e.what()).find("--memory-max: a pool option") != std::string::npos);
    CHECK(std::string(e.what()).find("MemoryMax=") != std::string::npos);
  }
}
