#pragma once
// The host owns the socket under libfcgi. libfcgi 2.4.2 calls its OS_Read, OS_Write,
// OS_IpcClose and OS_Accept through the PLT (they are exported from libfcgi.so.0), so the
// definitions in libfcgi_io.cpp, linked into the executable, take their place:
//   - OS_Read serves the bytes of the current request from the host's buffer, already framed
//     and checked by RecordGuard. libfcgi never reads the socket: no read blocks a worker, and a
//     pipelined next request stays in the host's buffer instead of being lost in libfcgi's.
//   - OS_Write writes on the non-blocking socket, waiting at most --write-timeout for a client
//     that stopped reading (libfcgi's write blocks forever).
//   - OS_IpcClose only records that libfcgi is done with the connection; the host closes it
//     with a plain close(). libfcgi's lingering close (shutdown, then poll and read up to 2 s
//     until the peer closes) costs a round trip per request and can stall a worker 2 s.
//   - OS_Accept refuses: the host accepts (accept4 on the shared socket), never libfcgi, whose
//     accept blocks and, on a Unix socket, then polls up to 2 s for the first byte.
// self_test() proves at worker start that the replacement is in effect.
#include <cstddef>
#include <sys/types.h>

namespace fcgi_host::libfcgi_io {

// The request libfcgi is reading now.
struct Source {
  int fd = -1;
  const char* data = nullptr; // the request's records
  std::size_t size = 0;
  std::size_t pos = 0;
  int write_timeout_ms = 30'000;
  bool closed_by_libfcgi = false; // libfcgi asked to close (no FCGI_KEEP_CONN, or an error)
  bool write_failed = false;      // the client went away or stopped reading
};

void attach(Source* source);
void detach();

// Writes all of buf on a non-blocking socket, waiting up to timeout_ms for each stall.
// Returns false (errno set, ETIMEDOUT for a stall) when it could not.
bool write_all(int fd, const char* buf, std::size_t len, int timeout_ms);

// Runs one canned request through FCGX_Accept_r over a socketpair with nothing in it: only the
// host's OS_Read can have produced the parsed params. False means libfcgi still uses its own I/O.
bool self_test();

} // namespace fcgi_host::libfcgi_io
