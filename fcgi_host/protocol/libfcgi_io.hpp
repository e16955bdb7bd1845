#pragma once
// The host owns the socket under libfcgi. libfcgi 2.4.2 calls its OS_Read, OS_Write,
// OS_IpcClose and OS_Accept through the PLT (they are exported from libfcgi.so.0), so the
// definitions in libfcgi_io.cpp, linked into the executable, take their place:
//   - OS_Read serves the bytes of the request being decoded from the host's buffer, already
//     framed and checked by RecordGuard. libfcgi never reads the socket: no read blocks a worker,
//     and a pipelined next request stays in the host's buffer instead of being lost in libfcgi's.
//   - OS_Write writes on the non-blocking socket. For a response that is complete in memory,
//     what the socket does not take at once goes to the connection's backlog (the worker sends
//     it from its event loop: a slow reader never holds the worker); a streamed response waits
//     for the socket up to its total deadline (libfcgi's write blocks forever).
//   - OS_IpcClose only records that libfcgi is done with the connection; the host closes it
//     with a plain close(). libfcgi's lingering close (shutdown, then poll and read up to 2 s
//     until the peer closes) costs a round trip per request and can stall a worker 2 s.
//   - OS_Accept refuses: the host accepts (accept4 on the shared socket), never libfcgi, whose
//     accept blocks and, on a Unix socket, then polls up to 2 s for the first byte.
// libfcgi names only a file descriptor when it calls these, so each connection being decoded or
// answered registers its Source under its fd: any number of codecs (an in-process host beside a
// worker, in threads) work side by side, with no process-wide "current" request.
#include <cstddef>
#include <cstdint>
#include <string>

namespace fcgi_host::libfcgi_io {

struct Source {
  int fd = -1;
  const char* data = nullptr; // the request's records
  std::size_t size = 0;
  std::size_t pos = 0;
  std::uint64_t write_deadline_ns = 0; // CLOCK_MONOTONIC
  std::string* backlog = nullptr;      // where unsent bytes go; nullptr: wait for the socket
  bool closed_by_libfcgi = false;      // libfcgi asked to close (no FCGI_KEEP_CONN, or an error)
  bool write_failed = false;           // the client went away, or the deadline passed
};

// Makes `source` the one libfcgi reads and writes for source->fd, until unregistered.
void register_source(Source* source);
void unregister_source(const Source* source);

// Runs one canned request through libfcgi over a socketpair with nothing in it: only the
// host's OS_Read can have produced the parsed params. False means libfcgi still uses its own I/O.
bool self_test();

} // namespace fcgi_host::libfcgi_io
