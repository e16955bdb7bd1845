#pragma once
// `fcgi-host replay FILE [--set-param NAME=VALUE]... [OPTIONS]`: runs a request that
// --capture-crashes kept (protocol/capture_file.hpp) through the handler of --app, in this one
// process: the real worker loop in a thread (runners/in_process_host.hpp), no master, no fork,
// so `gdb --args fcgi-host replay FILE --app x.so` stops where the worker crashed. OPTIONS are
// the host's own (--config FILE --pool NAME runs it as the pool runs); those that only a
// master uses (--listen, --workers, ...) are taken and ignored, --user is ignored (the process
// keeps its own user).
//
// Prints the response (its CGI head and body, as the handler wrote them) on stdout, what it
// replays on stderr. Exit codes: 0 answered; 1 no answer (the handler could not start); 2 bad
// usage, a bad option, or a file that is not a whole capture. A crash in the handler ends the
// process as it ended the worker.
#include "app/handler.hpp"

namespace fcgi_host {

bool is_replay_command(int argc, char** argv);
int run_replay_command(int argc, char** argv, app::Handler* own);

} // namespace fcgi_host
