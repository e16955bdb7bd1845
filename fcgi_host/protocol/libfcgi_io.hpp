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
// libfcgi names only a file descriptor when it calls these, so each stream registers its Source
// under the number libfcgi will name: a response writer (one per codec, made once with
// FCGX_CreateWriter and kept for the life of the process) under a key of its own taken from the
// top of the table (writer_key()), whose Source names the connection's real fd; the reference
// decoder (reference_decoder.hpp) under the fd it decodes from. Any number of codecs (an
// in-process host beside a worker, in threads) work side by side, with no process-wide
// "current" request.
//
// A writer is made with request id 1 and lives on from request to request, so OS_Write puts the
// id of the request being answered into the header of each record it writes (libfcgi's writer
// hands it whole records, one buffer at a time). And it never reports a failed write to libfcgi:
// a writer that saw one would be closed for good; the Source records it (write_failed) instead,
// and the codec looks there.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace fcgi_host::libfcgi_io {

struct Source {
  int fd = -1;                  // the connection
  std::uint16_t request_id = 0; // written into each record header (0: left as libfcgi wrote it)
  const char* data = nullptr;   // the request's records (the reference decoder)
  std::size_t size = 0;
  std::size_t pos = 0;
  std::uint64_t write_deadline_ns = 0; // CLOCK_MONOTONIC
  std::string* backlog = nullptr;      // where unsent bytes go; nullptr: wait for the socket
  std::string* gather = nullptr;       // set: OS_Write appends here instead of writing (the codec
                                       // sends it with the end of the request: one write)
  // Set: every byte for the client goes here instead of the socket (a handler thread's response,
  // which the worker's loop writes); false from it: the client is gone.
  bool (*deliver)(void* context, const char* data, std::size_t size) = nullptr;
  void* deliver_context = nullptr;
  bool closed_by_libfcgi = false; // libfcgi asked to close (no FCGI_KEEP_CONN, or an error)
  bool write_failed = false;      // the client went away, or the deadline passed
};

// Makes `source` the one libfcgi reads and writes when it names `key`, until unregistered.
void register_source(int key, Source* source);
void unregister_source(int key, const Source* source);
inline void register_source(Source* source) {
  register_source(source->fd, source);
}
inline void unregister_source(const Source* source) {
  unregister_source(source->fd, source);
}

// A number for a response writer to be known by: never a descriptor the process uses, and
// never given out twice.
int writer_key();

// Sends `len` bytes to the client of `s` as OS_Write does (the backlog, or waiting up to the
// deadline); false once a write failed (then s->write_failed is set).
bool write_to_client(Source& s, const char* buf, std::size_t len);

// Sends `data` to the client of `s` as STDOUT records of the request, their headers written
// around the caller's bytes (one gathered write for many records; the payload is never copied
// while the socket takes it), after `before` (bytes already framed, e.g. what libfcgi's writer
// held). Waits or fills the backlog as write_to_client() does.
bool write_stdout_records(Source& s, std::string_view before, const char* data, std::size_t len);

// Runs one canned request through libfcgi over a socketpair with nothing in it: only the
// host's OS_Read can have produced the parsed params. False means libfcgi still uses its own I/O.
bool self_test();

} // namespace fcgi_host::libfcgi_io
