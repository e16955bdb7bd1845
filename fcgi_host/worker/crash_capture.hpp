#pragma once
// --capture-crashes DIR: the request in flight when a worker dies of a fatal signal is kept in
// DIR (protocol/capture_file.hpp), so that `fcgi-host replay FILE` can run it again in one
// process, under a debugger.
//
// Who writes it, and when: the worker itself, in its fatal-signal handler
// (process_manager/crash_report.hpp calls the recorder before it wakes the master), so the
// crash block the master writes can name the file. The master could read the bytes instead
// (process_vm_readv, as its debugger does), but that works only where the debugger may attach
// (Yama, a container without CAP_SYS_PTRACE) and only for the crashes whose stack it takes (at
// most one a second); the worker writes every capture, whatever happens to the stack.
//
// What may go wrong in a crashed process, and what is done about it:
//  - the request's buffer may be damaged or gone: its bytes are first copied into a private
//    buffer with process_vm_readv on the worker itself, which fails (EFAULT) instead of
//    faulting; redaction and writing then work on that copy only;
//  - a fault in here anyway: the fatal handlers are one-shot (SA_RESETHAND), so it kills the
//    worker at once; a hang (a stuck disk) ends with the handler's alarm;
//  - in a signal handler: only open/write/fchmod/close/unlink, no allocation, no stdio: the
//    buffer is mapped at boot (untouched pages, no memory until a crash), the names and the
//    patterns are made at boot too.
//
// Nothing of it runs before a crash: serving a request costs the same with the option on.
//
// Files: DIR/crash-N.fcgi (DIR/crash-POOL-N.fcgi for a pool), N from 1 to --capture-max-files,
// each taken with O_EXCL (two workers crashing at once never share one), mode 0600. When all N
// exist, nothing more is kept until the operator removes some: the first crashes of a crash
// loop are kept, never overwritten by its later ones, and each crash block says why its request
// was not kept.
#include "process_manager/scoreboard.hpp"

#include <cstddef>
#include <string>
#include <vector>

namespace fcgi_host {

struct CaptureSettings {
  std::string dir;                   // absolute; empty: off
  std::string file_prefix = "crash"; // "crash-POOL" for a pool
  std::size_t max_bytes = 1 << 20;   // the most request bytes a file keeps
  unsigned max_files = 10;
  std::vector<std::string> redact; // patterns, beside capture::kBuiltinRedactions
  bool keep_body = true;
};

class CrashCapture {
public:
  CrashCapture() = default;
  ~CrashCapture();
  CrashCapture(const CrashCapture&) = delete;
  CrashCapture& operator=(const CrashCapture&) = delete;

  // In the worker process, with its own credentials: checks that it may write DIR and maps the
  // buffer. An error text (a boot failure) when DIR cannot be used.
  std::string open(const CaptureSettings& settings);

  // From the fatal-signal handler: keeps `size` bytes of records at `data` (the request in
  // flight) and writes what happened into the slot's crash note ("request captured to ...").
  void save(process_manager::WorkerSlot& slot, int sig, const char* data, std::size_t size);

private:
  CaptureSettings settings_;
  char* buffer_ = nullptr; // settings_.max_bytes: the copy of the request
  std::size_t buffer_size_ = 0;
};

} // namespace fcgi_host
