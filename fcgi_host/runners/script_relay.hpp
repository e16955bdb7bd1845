#pragma once
// The host in front of an --exec program, for --script-root and --script-extensions: an exec'd
// program accepts on the shared socket itself, so the host never sees its requests. With either
// option the worker does not exec the program in its own process: it stays the host, accepts on
// the shared socket, and relays each connection to the program (its child) over one private
// connection, after checking the request's script (ScriptGate). A refused request is answered
// `404 Not Found` by the host, with one rate-limited log line, and the program never sees it.
//
// The private connection: a Unix socket bound in a fresh 0700 directory of the worker's user,
// listened on (the program's fd 0, as spawn-fcgi's contract wants), connected to once and
// unlinked at once: no other process can reach the program. Every request goes over it with
// FCGI_KEEP_CONN set (the host closes the client's connection when the client asked so), one
// request at a time, as php-cgi serves them.
//
// The client's side is framed by the house's parts, as a plugin worker's: the record guard
// (record_guard.hpp) with the worker's limits (--max-params, --max-params-size, --max-body,
// --max-records) and its refusals, then, for a body still on its way, StdinStream. Each request
// relayed is published in the worker's request slot (method, URI, start), so that the status
// page and --request-timeout see it.
//
// The program's life is the worker's: it is forked with fork_clean, gets SIGKILL when the relay
// dies (and the relay kills and reaps it when it stops); when the program exits (php-cgi after
// PHP_FCGI_MAX_REQUESTS), the relay finishes and exits with the program's code, and the master
// starts a new worker. The relay reads its signals as a worker does (WorkerSignals): TERM
// (retire, stop) lets the request in flight finish, QUIT stops at once.
#include "fcgi_host/runners/exec_worker.hpp"

namespace fcgi_host {

// Runs the worker as the relay; returns its exit code (a boot failure when the program could not
// start).
int run_script_relay(const process_manager::WorkerContext& context, const ExecSettings& settings);

} // namespace fcgi_host
