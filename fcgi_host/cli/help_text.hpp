#pragma once
// The tables --help prints and the README repeats: keep them in step with
// process_manager/signals.hpp and process_manager/exit_codes.hpp.
namespace fcgi_host {

inline constexpr const char* kClientCommandsHelp =
    "Health checks (fcgi-host status|ping --help for more):\n"
    "  --connect ADDR     required: the host's --status-listen or --listen address\n"
    "  --path PATH        the status or ping path (default: /status, /ping)\n"
    "  --json, --openmetrics, --prometheus, --html, --full   status: the page's format\n"
    "  --max-queue N      status: unhealthy when no worker is idle and more than N wait\n"
    "  --timeout SECONDS  give up after this long (default: 5)\n"
    "  Exit 0: healthy; 1: unhealthy (not 200, or the queue above --max-queue); 2: usage;\n"
    "  3: no answer, or an answer that is not fcgi-host's (no X-Fcgi-Host header)\n"
    "Control, through the master's Unix --status-listen socket, as its user or root:\n"
    "  fcgi-host reload [POOL] --connect ADDR   reload every pool, or one (a single\n"
    "                                           application: as HUP does)\n"
    "  fcgi-host scale [POOL] N --connect ADDR  set the workers of a pool (or of the\n"
    "                                           application) to N\n"
    "  Exit 0: done; 1: refused (the answer says why); 2: usage; 3: no answer\n"
    "  fcgi-host reload --wait ...              also wait for the reload's outcome (up to\n"
    "                                           --timeout, default 600): exit 0 promoted,\n"
    "                                           1 undone (--rollout canary: worse than the\n"
    "                                           old build), 3 no outcome\n";

inline constexpr const char* kReplayHelp =
    "Replay (fcgi-host replay --help for more):\n"
    "  fcgi-host replay FILE [--set-param NAME=VALUE]... [OPTIONS]\n"
    "      run a request --capture-crashes kept through the handler of --app (and the other\n"
    "      OPTIONS, --config and --pool too) in this one process, no fork: under\n"
    "      gdb --args it stops where the worker crashed; prints the response on stdout.\n"
    "      --set-param gives a param another value (a redacted cookie, say).\n"
    "  Exit 0: answered; 1: no answer (the handler could not start); 2: usage, or a file\n"
    "  that is not a whole capture; a crash ends it as it ended the worker\n";

inline constexpr const char* kSignalsHelp =
    "Signals (send them to the master):\n"
    "  TERM, QUIT  graceful stop: stop accepting, finish in-flight and queued requests\n"
    "              (up to --graceful-timeout, then kill), exit 0\n"
    "  INT         fast stop: workers exit at once\n"
    "  HUP         graceful reload: re-read the config; if it is good, start a new generation\n"
    "              of workers and stop the old one gracefully once the new one accepts\n"
    "  USR1        reopen the log files\n"
    "  USR2        binary upgrade (re-exec, keeping the socket)\n"
    "  TTIN, TTOU  one worker more, one worker less\n";

inline constexpr const char* kExitCodesHelp =
    "Exit codes:\n"
    "  0  stopped on request (TERM, QUIT, INT), or --help, --version, a good --test-config\n"
    "  1  runtime failure: workers could not boot (died before they were ready), or a fatal\n"
    "     error in the master\n"
    "  2  bad option or config file, or what --test-config finds (unknown user or group, missing\n"
    "     directory, program or plugin, unknown app, unresolvable address, bad log format)\n"
    "  3  start-up failure: listening socket, log file, pidfile or dropping privileges\n";

} // namespace fcgi_host
