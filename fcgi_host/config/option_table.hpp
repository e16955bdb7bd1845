#pragma once
// Every option of fcgi-host, once: its name, default, value name and description. The parser,
// --help, the defaults of Limits (and of the record guard's limits) are built from this table;
// docs/fcgi-host.1, conf/fcgi-host.conf and the README are checked against it by a unit test.
//
// Plain constexpr data without dependencies, so that any room may read a default from it.
#include <array>
#include <chrono>
#include <cstddef>
#include <string_view>

namespace fcgi_host {

enum class OptionKind {
  Value,  // --name VALUE, once
  List,   // --name VALUE, repeatable (each one adds; in the file as well)
  OnOff,  // --name on|off (--name alone: on); `name = on|off` (or true|false, yes|no) in the file
  Command // --help, --version, --config, --test-config: the command line only
};

struct OptionSpec {
  std::string_view name;
  char short_name;               // 0: none
  std::string_view value_name;   // empty for a switch
  std::string_view default_text; // empty: no default value (the description says what happens)
  std::string_view description;
  OptionKind kind = OptionKind::Value;
};

// The order is the order of --help, the man page and conf/fcgi-host.conf.
inline constexpr std::array kOptions = std::to_array<OptionSpec>({
    {"help", 'h', "", "", "print this help, the signal table and the exit codes, then exit",
     OptionKind::Command},
    {"version", 0, "", "", "print the version and exit", OptionKind::Command},
    {"config", 'c', "FILE", "", "read options from this INI file (the command line wins)",
     OptionKind::Command},
    {"test-config", 't', "", "",
     "check the options, the config file and everything start needs short of binding and "
     "forking, then exit",
     OptionKind::Command},
    {"pool", 0, "NAME", "",
     "run only this [NAME] section of a config file that defines pools (without it, the "
     "master runs every pool)",
     OptionKind::Command},

    {"listen", 'l', "ADDR", "",
     "unix:/path, /path, HOST:PORT, [IPv6]:PORT or :PORT (default: the listening socket "
     "inherited on fd 0 as spawn-fcgi passes it, or from systemd's LISTEN_FDS)"},
    {"backlog", 0, "N", "1024", "listen queue length"},
    {"socket-mode", 0, "MODE", "0660", "permissions of a Unix socket, in octal"},
    {"socket-owner", 0, "USER", "", "owner of a Unix socket (default: the user running fcgi-host)"},
    {"socket-group", 0, "GROUP", "", "group of a Unix socket (default: that user's group)"},
    {"allow-clients", 0, "LIST", "",
     "only these addresses or CIDRs may connect over TCP, comma-separated, IPv4 and IPv6 "
     "(default: everyone who can reach the socket; an empty list is an error, not everyone)"},

    {"workers", 'w', "N", "",
     "worker processes (default: the CPUs the process may use: its cgroup's CPU quota rounded "
     "up, else its affinity mask, else the cores)"},
    {"threads", 0, "N", "1",
     "handler threads per worker: up to N requests at once, one on the worker's loop thread (a "
     "standby takes the loop when it runs long) and the others on N-1 threads, each with its own "
     "handler instance unless the app is thread-safe (1: the loop runs the handler)"},
    {"event-heartbeat", 0, "SECONDS", "15",
     "an event stream (text/event-stream) quiet this long gets a heartbeat comment from the "
     "host, so that proxies keep it open (0: never)"},
    {"idle-work-after", 0, "MS", "1000",
     "a worker (each handler thread with --threads) that served no request for this long runs "
     "the handler's on_idle() once, taking no request meanwhile (0: never)"},
    {"trim-when-idle", 0, "on|off", "off",
     "with --idle-work-after: the idle work also gives freed heap memory back to the system "
     "(malloc_trim)",
     OptionKind::OnOff},
    {"app", 'a', "NAME|PATH.so", "hello",
     "built-in app (hello, echo) or the path of a plugin library"},
    {"exec", 0, "PROGRAM", "",
     "spawn mode: run PROGRAM as each worker, with the listening socket on its fd 0, as "
     "spawn-fcgi does, but supervised; on the command line every word after PROGRAM is the "
     "program's (its own options after --), in the file the value is split at spaces"},
    {"pm", 0, "MODE", "static",
     "static (always --workers), dynamic (between spares), ondemand (spawn on demand)"},
    {"min-spare", 0, "N", "1", "dynamic: fewest idle workers"},
    {"max-spare", 0, "N", "3", "dynamic: most idle workers"},
    {"max-workers", 0, "N", "0", "dynamic, ondemand: most workers (0: --workers)"},
    {"idle-timeout", 0, "SECONDS", "10", "ondemand: stop a worker idle this long"},
    {"user", 0, "USER", "",
     "run workers as this user (the socket is bound first; started as root without it, workers "
     "run as nobody: give root to keep root)"},
    {"group", 0, "GROUP", "", "run workers with this group (default: the user's)"},
    {"env", 0, "NAME=VALUE", "",
     "set an environment variable for the workers (repeatable, in the file as well)",
     OptionKind::List},
    {"clear-env", 0, "on|off", "on",
     "start workers and --exec programs with an empty environment: only the --env variables, "
     "and PATH=/usr/local/bin:/usr/bin:/bin unless --env sets PATH (off: they inherit the "
     "master's environment, --env added)",
     OptionKind::OnOff},
    {"chdir", 0, "DIR", "", "the master and its workers change to this directory"},
    {"pidfile", 0, "FILE", "",
     "write the master's pid here; the file is locked for the master's life, so a second master "
     "on it is refused before it touches the socket"},
    {"rlimit-files", 0, "N", "",
     "the open-files limit (RLIMIT_NOFILE, soft and hard) of the master and its workers "
     "(default: inherited)"},
    {"rlimit-core", 0, "BYTES", "",
     "the core-file size limit (RLIMIT_CORE) of the master and its workers: 0, a size with K, "
     "M, G, or unlimited (default: inherited)"},
    {"nice", 0, "N", "",
     "the scheduling niceness of the master and its workers, -20 to 19 "
     "(default: inherited)"},
    {"sandbox", 0, "MODE", "off",
     "confine each worker once its handler is loaded, before its first request: Landlock "
     "(it may read only its own files, the system files a handler needs and --sandbox-read, "
     "write only --sandbox-write, connect only to --sandbox-connect ports), a seccomp filter "
     "(no ptrace, mount, namespaces, modules, bpf, exec, chmod, chown, utimes, xattrs, "
     "inotify...: EPERM), no_new_privs, no capabilities; on (a kernel that cannot is refused "
     "at start), best-effort (what the kernel has, said once), log (as on, but a filtered call "
     "is logged by the kernel instead of refused), off"},
    {"sandbox-read", 0, "PATH", "",
     "--sandbox: a file or directory tree the workers may read (repeatable)", OptionKind::List},
    {"sandbox-write", 0, "PATH", "",
     "--sandbox: a file or directory tree the workers may read and write (repeatable)",
     OptionKind::List},
    {"sandbox-connect", 0, "HOST:PORT", "",
     "--sandbox: a TCP port the workers may connect to (repeatable; a database's); Landlock's "
     "rules are per port, so HOST documents the intent and any host's PORT is allowed; without "
     "one, no TCP connection (Landlock ABI 4)",
     OptionKind::List},
    {"sandbox-bind", 0, "PORT", "",
     "--sandbox: a TCP port the workers may bind (repeatable); without one, none",
     OptionKind::List},
    {"sandbox-exec", 0, "on|off", "off",
     "--sandbox: let the handler run programs (execve and memfd_create; the --sandbox-read and "
     "--sandbox-write paths become executable)"},
    {"private-tmp", 0, "on|off", "off",
     "give the workers a /tmp of their own, shared by the pool's workers and empty at start (a "
     "tmpfs in a mount namespace; needs fcgi-host started as root)"},
    {"script-root", 0, "DIR", "",
     "--exec: the host checks each request's SCRIPT_FILENAME, resolved (.. and symbolic links "
     "followed), and answers 404 itself, with a log line, for a script outside DIR; the "
     "program sees only the others (the worker relays them); with --sandbox, DIR is in the "
     "program's Landlock read list too"},
    {"script-extensions", 0, "SUFFIXES", "",
     "--exec: the suffixes a script may have (\".php\", \".php .phar\"; repeatable): the host "
     "answers 404 for any other, as php-fpm's security.limit_extensions (default: any)",
     OptionKind::List},
    {"memory-max", 0, "BYTES", "",
     "pools: the memory limit (memory.max) of a cgroup v2 of the pool's own, which its master "
     "and workers run in: a size with K, M, G, or max; needs a delegated cgroup v2 subtree "
     "(systemd Delegate=yes); a worker the OOM killer kills is said so in its exit line and "
     "counted in the metrics (default: no limit, no cgroup)"},
    {"cpu-weight", 0, "N", "",
     "pools: the CPU weight (cpu.weight) of the pool's own cgroup v2, 1 to 10000 (100 is an "
     "even share); needs a delegated cgroup v2 subtree (default: no cgroup)"},
    {"max-workers-total", 0, "N", "0",
     "pools: the most workers all pools may have together, checked against each pool's "
     "ceiling at start and reload (0: no cap; a global option)"},

    {"ready-path", 0, "PATH", "",
     "a worker serves only once its handler has answered a GET of PATH with 2xx, after "
     "on_worker_start; one that does not is a boot failure (a start stops, a reload keeps the "
     "old generation serving)"},
    {"reload-grace", 0, "SECONDS", "0",
     "after a reload, a new generation whose workers crash 3 times within this long is "
     "replaced by the previous configuration again (0: off)"},
    {"rollout", 0, "all|canary", "all",
     "how a reload replaces the workers: all (once the new generation is ready), or canary "
     "(the new generation serves on --canary-workers beside the old one for --rollout-window, "
     "then replaces it --rollout-step workers at a time, or is undone when it answers more 5xx "
     "or slower; per pool)"},
    {"canary-workers", 0, "N", "1",
     "--rollout canary: the new generation's workers while it is watched (the old generation "
     "keeps the rest of the pool)"},
    {"rollout-window", 0, "SECONDS", "30",
     "--rollout canary: how long both generations are watched before the judgement"},
    {"undo-on-errors", 0, "RATIO", "0.02",
     "--rollout canary: undo when the canary's share of 5xx answers exceeds the old "
     "generation's by more than this"},
    {"undo-on-latency", 0, "FACTOR", "2",
     "--rollout canary: undo when the canary's p99 duration exceeds this many times the old "
     "generation's"},
    {"rollout-step", 0, "N", "0",
     "--rollout canary: the old workers replaced at a time once the canary is promoted (0: a "
     "quarter of the pool, at least 1)"},
    {"watch", 0, "on|off", "off",
     "reload as HUP does when the plugin file or a configuration file changes (rebuilt, "
     "renamed over, rewritten), once the changes have settled; a build that does not load "
     "keeps the running generation (per pool)"},
    {"mold", 0, "on|off", "off",
     "a mold per generation: a process of the workers' user that loads the application once, "
     "runs its mold hook (FCGI_HOST_MOLD) and forks every worker, which shares what it built "
     "copy-on-write; the master never opens the plugin file (per pool)"},
    {"graceful-timeout", 0, "SECONDS", "30",
     "how long in-flight requests may run on stop and reload before workers are killed"},
    {"request-timeout", 0, "SECONDS", "0",
     "kill and replace a worker whose request runs longer (0: never)"},
    {"max-requests", 0, "N", "0", "recycle a worker after this many requests (0: never)"},
    {"max-requests-jitter", 0, "N", "0",
     "add a random 0..N to each worker's --max-requests, so they never restart in step"},
    {"max-rss", 0, "MIB", "0",
     "recycle a worker after the request that took its memory (RSS) past this (0: never)"},

    {"max-body", 0, "BYTES", "8M", "largest request body (K, M, G suffixes); larger: 413"},
    {"max-params-size", 0, "BYTES", "64K",
     "largest total size of a request's FastCGI params; larger: 400"},
    {"max-params", 0, "N", "1000", "most FastCGI params in a request; more: 400"},
    {"max-records", 0, "N", "100000",
     "most FastCGI records in a request; more: the connection is closed"},
    {"max-connections", 0, "N", "256",
     "most connections one worker holds (kept-alive ones included); when reached, the "
     "connection that made the least progress is closed to make room"},
    {"header-timeout", 0, "SECONDS", "10", "time from connect to the end of the request's params"},
    {"body-timeout", 0, "SECONDS", "30",
     "longest pause while reading a request body; also its total time, plus one second per "
     "--body-min-rate bytes received"},
    {"body-min-rate", 0, "BYTES", "16K",
     "bytes per second a body must average past --body-timeout (0: the body's total time is "
     "--body-timeout)"},
    {"max-buffered", 0, "BYTES", "64M",
     "bytes of unfinished requests and unsent responses one worker holds (at least --max-body); "
     "past it, the connections that made the least progress are closed"},
    {"spill-threshold", 0, "BYTES", "1M",
     "a request body larger than this is kept in an unlinked temporary file, not in memory "
     "(--max-body still caps it)"},
    {"handoff-after", 0, "SECONDS", "0.002",
     "move a worker's kept connections to a free worker once its handler has run this long "
     "(0: only when the worker stops; a stopping worker always passes them on)"},
    {"keepalive-timeout", 0, "SECONDS", "75",
     "close a kept connection idle this long (keep it above nginx's keepalive_timeout)"},
    {"write-timeout", 0, "SECONDS", "30",
     "the total time a response may take to reach a client that reads it slowly (a response "
     "complete in memory goes out from the worker's event loop, so a slow reader never holds "
     "the worker)"},
    {"max-response-head", 0, "BYTES", "4K",
     "the buffer a response head (status line and headers) must fit in with the 8-byte header "
     "of its FastCGI record and a byte to spare, as nginx's fastcgi_buffer_size (4K by default) "
     "must hold it; larger: logged and answered 500, not left to become the web server's 502"},
    {"send-file-mode", 0, "MODE", "stream",
     "how Response::send_file() answers: stream (the host sends the file), x-accel-redirect "
     "(nginx sends it: an X-Accel-Redirect header under --x-accel-prefix), x-sendfile (Apache "
     "mod_xsendfile, lighttpd: an X-Sendfile header)"},
    {"x-accel-prefix", 0, "PATH", "/internal",
     "x-accel-redirect: the nginx internal location a sent file's absolute path goes under"},

    {"error-log", 0, "FILE", "", "write the log to this file (default: stderr)"},
    {"log-level", 0, "LEVEL", "notice", "debug, info, notice, warn, error or alert"},
    {"access-log", 0, "FILE", "", "write one line per request to this file (default: none)"},
    {"access-format", 0, "FORMAT", "%a %m %u %s %d %b",
     "access log line: %a remote address, %m method, %u URI, %s status (499: aborted by the "
     "web server), %d duration ms, %c CPU ms, %b body bytes, %p pid, %w worker slot, "
     "%g generation, %t time, %q queue time ms (- when not stamped), %I request id, "
     "%{NAME}e a FastCGI parameter, %{Name}o a response header, %% a percent sign"},
    {"slow-request-threshold", 0, "SECONDS", "0",
     "log requests that take longer, with one stack of the worker while they run (0: off)"},
    {"capture-crashes", 0, "DIR", "",
     "keep in DIR the request a worker was serving when it died of a fatal signal (DIR: an "
     "absolute path the workers' user may write), for fcgi-host replay FILE to run it again in "
     "one process; the crash block names the file (default: off)"},
    {"capture-max-bytes", 0, "BYTES", "1M",
     "the most bytes of a request a capture keeps: its params always whole, its body cut to "
     "fit"},
    {"capture-max-files", 0, "N", "10",
     "the most captures DIR keeps for the pool; once they are all there, no more are kept "
     "(each crash block says so) until some are removed"},
    {"capture-redact", 0, "PATTERN", "",
     "also redact the params and form fields whose names match PATTERN (* and ?, any case; "
     "repeatable); always redacted: HTTP_COOKIE, HTTP_AUTHORIZATION, HTTP_PROXY_AUTHORIZATION, "
     "*PASSWORD*, *PASSWD*, *SECRET*, *TOKEN*, *API_KEY*; a redacted value keeps its length, "
     "each byte an x",
     OptionKind::List},
    {"capture-body", 0, "on|off", "on",
     "keep the request body in a capture (off: the replay gets an empty body)"},
    {"max-queue-time", 0, "MS", "0",
     "answer 503 at once, without running the handler, to a request that waited longer for a "
     "worker (arrival stamped by the web server in HTTP_X_REQUEST_START), or whose client is "
     "gone (0: off)"},
    {"metrics", 0, "on|off", "on", "keep per-handler metrics and the scoreboard's request details"},
    {"status-path", 0, "PATH", "",
     "answer this path with the status page: text, or ?json, ?openmetrics, ?prometheus, ?html, "
     "?text, with &full for every worker; without a query word, the Accept header chooses "
     "(OpenMetrics or the Prometheus text format for a Prometheus scrape)"},
    {"ping-path", 0, "PATH", "", "answer this path with --ping-response"},
    {"ping-response", 0, "TEXT", "pong", "the body of a ping answer"},
    {"status-listen", 0, "ADDR", "",
     "the master itself serves status and ping here, also when every worker is busy"},
    {"status-allow", 0, "LIST", "127.0.0.0/8 ::1 unix",
     "addresses or CIDRs allowed to read status and ping, and unix for the clients of a Unix "
     "socket server; what does not parse is refused; a TCP --status-listen needs it said"},
    {"health-listen", 0, "ADDR", "",
     "the master itself answers plain HTTP here: /livez, /readyz and /metrics (Prometheus text, "
     "or OpenMetrics by Accept), also when every worker is busy; in a pools file, per pool (in "
     "its section)"},
    {"health-allow", 0, "LIST", "127.0.0.0/8 ::1 unix",
     "addresses or CIDRs allowed to read the health port, and unix for the clients of a Unix "
     "socket; what does not parse is refused; a TCP --health-listen needs it said"},
    {"ready-max-queue-time", 0, "MS", "0",
     "/readyz answers 503 while the request that began last waited longer than this in the "
     "queue (stamped by the web server's X-Request-Start); 0: off"},
});

constexpr const OptionSpec* find_option(std::string_view name) {
  for (const OptionSpec& o : kOptions)
    if (o.name == name) return &o;
  return nullptr;
}

// The default of an option as a number, parsed at compile time ("8M", "64K", "1000").
constexpr std::size_t default_size(std::string_view name) {
  std::string_view text = find_option(name)->default_text;
  std::size_t value = 0, i = 0;
  for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i)
    value = value * 10 + static_cast<std::size_t>(text[i] - '0');
  if (i < text.size()) value <<= text[i] == 'K' ? 10 : text[i] == 'M' ? 20 : 30;
  return value;
}

// The default of an octal option ("0660").
constexpr unsigned default_octal(std::string_view name) {
  unsigned value = 0;
  for (char c : find_option(name)->default_text)
    value = value * 8 + static_cast<unsigned>(c - '0');
  return value;
}

// The default of a SECONDS option ("30", "0.002"), to the millisecond.
constexpr std::chrono::milliseconds default_duration(std::string_view name) {
  std::string_view text = find_option(name)->default_text;
  long long ms = 0, scale = 1000;
  bool fraction = false;
  for (char c : text) {
    if (c == '.') {
      fraction = true;
    } else if (!fraction) {
      ms = ms * 10 + (c - '0') * 1000;
    } else if (scale > 1) {
      scale /= 10;
      ms += (c - '0') * scale;
    }
  }
  return std::chrono::milliseconds(ms);
}

} // namespace fcgi_host
