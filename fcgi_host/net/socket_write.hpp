#pragma once
// Writing on a non-blocking socket with a total deadline: a client that reads slowly cannot
// hold the writer past it, however many bytes trickle through on the way.
#include <cstddef>
#include <cstdint>

namespace fcgi_host {

// Writes all of buf, waiting in poll() while the socket is full, until deadline_ns
// (CLOCK_MONOTONIC). Returns false (errno set; ETIMEDOUT at the deadline) when it could not.
bool write_all_until(int fd, const char* buf, std::size_t len, std::uint64_t deadline_ns);

// Writes what the socket takes now without waiting. Returns the bytes written, or -1 (errno
// set) when the peer is gone.
long write_some(int fd, const char* buf, std::size_t len);

// The same as write_all_until with a deadline timeout_ms from now.
bool write_all(int fd, const char* buf, std::size_t len, int timeout_ms);

} // namespace fcgi_host
