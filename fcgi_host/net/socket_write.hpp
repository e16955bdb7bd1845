#pragma once
// Writing on a non-blocking socket with a total deadline: a client that reads slowly cannot
// hold the writer past it, however many bytes trickle through on the way.
#include <cstddef>
#include <cstdint>
#include <string>
#include <sys/uio.h>

namespace fcgi_host {

// Writes all of buf, waiting in poll() while the socket is full, until deadline_ns
// (CLOCK_MONOTONIC). Returns false (errno set; ETIMEDOUT at the deadline) when it could not.
bool write_all_until(int fd, const char* buf, std::size_t len, std::uint64_t deadline_ns);

// Writes what the socket takes now without waiting. Returns the bytes written, or -1 (errno
// set) when the peer is gone.
long write_some(int fd, const char* buf, std::size_t len);

// The same as write_all_until with a deadline timeout_ms from now.
bool write_all(int fd, const char* buf, std::size_t len, int timeout_ms);

// Gathered writes (sendmsg, one system call for many pieces: record headers around a caller's
// bytes, which are never copied). Both advance `iov`/`count` past what went out.
// Writes what the socket takes now without waiting; -1 (errno set) when the peer is gone.
long writev_some(int fd, iovec*& iov, int& count);
// Writes it all, waiting in poll() while the socket is full, until deadline_ns; false (errno set,
// ETIMEDOUT at the deadline) when it could not.
bool writev_all_until(int fd, iovec* iov, int count, std::uint64_t deadline_ns);
// Appends the pieces to `out` (the rest a socket did not take, for a backlog).
void append_iov(std::string& out, const iovec* iov, int count);

} // namespace fcgi_host
