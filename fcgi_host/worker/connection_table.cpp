#include "fcgi_host/worker/connection_table.hpp"

#include <algorithm>
#include <unistd.h>

namespace fcgi_host {
namespace {

// Spares kept for reuse, and the largest buffers one may keep (a large request's buffers go
// back to the allocator rather than sit in a spare).
constexpr std::size_t kSpareConnections = 16;
constexpr std::size_t kSpareBufferBytes = 64 * 1024;
// The table grows by this many fds at a time.
constexpr std::size_t kGrowBy = 64;

} // namespace

ConnectionTable::~ConnectionTable() {
  for_each([](Connection& c) { ::close(c.fd); });
}

Connection& ConnectionTable::add(int fd, std::uint64_t now) {
  auto index = static_cast<std::size_t>(fd);
  if (index >= by_fd_.size()) by_fd_.resize(index + kGrowBy);
  if (open_ == 0) {
    scan_begin_ = index;
    scan_end_ = index + 1;
  } else {
    scan_begin_ = std::min(scan_begin_, index);
    scan_end_ = std::max(scan_end_, index + 1);
  }
  if (spares_.empty()) {
    by_fd_[index] = std::make_unique<Connection>(fd, limits_, values_, now);
  } else {
    by_fd_[index] = std::move(spares_.back());
    spares_.pop_back();
    by_fd_[index]->reuse(fd, now);
  }
  ++open_;
  return *by_fd_[index];
}

void ConnectionTable::remove(Connection& c) {
  auto& slot = by_fd_[static_cast<std::size_t>(c.fd)];
  c.pump.reset(); // a body being gathered: its memory (or file) goes with the connection
  if (spares_.size() < kSpareConnections && c.in.capacity() <= kSpareBufferBytes &&
      c.backlog.capacity() <= kSpareBufferBytes) {
    if (spares_.capacity() == 0) spares_.reserve(kSpareConnections);
    spares_.push_back(std::move(slot));
  } else {
    slot.reset();
  }
  --open_;
  narrow_scan();
}

// After a remove: the range shrinks to the fds still held (a sweep that removes the connection
// it is given reads scan_end_ again, and what lies beyond is empty).
void ConnectionTable::narrow_scan() {
  if (open_ == 0) {
    scan_begin_ = scan_end_ = 0;
    return;
  }
  while (!by_fd_[scan_begin_])
    ++scan_begin_;
  while (!by_fd_[scan_end_ - 1])
    --scan_end_;
}

} // namespace fcgi_host
