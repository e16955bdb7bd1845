#pragma once
// When a worker dies of a fatal signal, the master writes one block: the request in flight (from
// the scoreboard slot) and the worker's native stack with symbol names.
//
// How the stack is taken: the worker's handler for SEGV, BUS, FPE, ILL and ABRT notes the signal
// in its slot and waits there (a few seconds at most); the master, woken by a SIGCHLD, attaches
// the same debugger it uses before a request-timeout kill (stack_trace.hpp: eu-stack, else gdb)
// to the crashed thread, then releases the worker, which dies of the signal it caught (its exit
// status, and a core dump if enabled, are what they would have been). A debugger reads the whole
// symbol table, debug info and inlined frames; an unwind inside the signal handler
// (backtrace_symbols_fd) names only exported functions, which is measured in
// docs/observability.md. Nothing of it runs before a crash: the handler is installed once per
// worker, and its work is done by the master.
//
// The handler stays correct when things are worse than a plain fault: it runs on an alternate
// stack (a stack overflow still reports), with SA_RESETHAND | SA_NODEFER (a fault inside it kills
// the worker at once) and under an alarm (a hang inside it ends the worker too).
#include "process_manager/scoreboard.hpp"

#include <cstdint>
#include <string>
#include <sys/types.h>

namespace process_manager {

// Worker side, once, in the forked child before its entry point: alternate stack, handlers,
// and (under Yama's ptrace_scope 1) permission for the master's debugger to attach.
void install_crash_handler(WorkerSlot& slot, pid_t master);

// In a thread the worker starts (--threads): a stack of its own for the crash handler, so that
// a stack overflow in that thread is reported too.
void give_thread_alt_stack();

// What the handler copies from the request in flight into the slot (the route, known only to
// the worker): a plain function over memory the worker owns, called from the signal handler, so
// it must not allocate, lock or call anything that does. Null: nothing.
using CrashDescriber = void (*)(WorkerSlot& slot, const void* context);
void set_crash_describer(CrashDescriber describe, const void* context);

// Called from the handler after the describer, before the master is woken, with the signal:
// keeps what it may of the request in flight (--capture-crashes) and says so in
// slot.crash_note, a line of the crash block. Async-signal-safe, as the describer. Null: none.
using CrashRecorder = void (*)(WorkerSlot& slot, int sig, void* context);
void set_crash_recorder(CrashRecorder record, void* context);

// Master side. True when the worker of `slot` caught a fatal signal and waits for its stack.
bool crash_waiting(const WorkerSlot& slot);
// Lets it die.
void release_crashed(WorkerSlot& slot);

// With threads: the requests in flight in the crashed worker beside the faulting one (lost with
// it; counted as fcgihost_requests_lost_total{reason="crash"}).
std::uint32_t requests_lost_beside(const WorkerSlot& slot);

// The block's lines after the worker's exit line: the request in flight (method, URI, route,
// request id, how long it had run, queue time) or that there was none, the recorder's note if
// any, then `stack` (frame lines, or one line saying why there is no stack).
std::string describe_crash(const WorkerSlot& slot, std::uint64_t now_ns, const std::string& stack);

// The frames of a worker's stack (capture_stack()) that are the program's: those of the crash
// handler and the signal trampoline above the faulting frame, and the master's frames from before
// the fork below the worker's entry point, are dropped.
std::string worker_frames(const std::string& frames);

// The signals the handler catches.
bool is_fatal_signal(int sig);

} // namespace process_manager
