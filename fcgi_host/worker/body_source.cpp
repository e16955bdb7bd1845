#include "fcgi_host/worker/body_source.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <sys/uio.h>

namespace fcgi_host {

BodySource::BodySource(int fd, const StdinStream::Start& start, std::string_view buffered)
    : fd_(fd), stream_(start), pending_(buffered.data()), pending_size_(buffered.size()) {}

void BodySource::fail(int status, std::string why) {
  if (status_ != 0) return; // the first failure is the one that counts
  status_ = status;
  reason_ = std::move(why);
}

std::size_t BodySource::read(char* out, std::size_t size, Status& status) {
  for (;;) {
    if (status_ != 0) {
      status = Status::Failed;
      return 0;
    }
    // Headers and padding first, from what was read already.
    const std::size_t framing = stream_.take_framing(pending_, pending_size_);
    pending_ += framing;
    pending_size_ -= framing;
    switch (stream_.state()) {
    case StdinStream::State::End:
      status = Status::End;
      return 0;
    case StdinStream::State::Aborted:
      fail(400, "the web server aborted the request while its body was read");
      continue;
    case StdinStream::State::Refused:
      fail(stream_.status(), stream_.reason());
      continue;
    case StdinStream::State::Broken:
      fail(400, stream_.reason());
      continue;
    case StdinStream::State::Content:
      if (size == 0) { // the caller makes room for the record's content first
        status = Status::Bytes;
        return 0;
      }
      if (pending_size_ > 0) { // content read already: copied out of the buffer it came in
        const std::size_t n = std::min({size, stream_.content_left(), pending_size_});
        std::memcpy(out, pending_, n);
        pending_ += n;
        pending_size_ -= n;
        stream_.took_content(n);
        status = Status::Bytes;
        return n;
      }
      break;
    case StdinStream::State::Framing:
      break;
    }
    // One readv: content straight into `out` and, with the rest of the record, the next
    // header into scratch_; then that record's content goes straight to the caller too: one
    // read per record, nothing copied twice. Between records, the next header alone.
    const std::size_t direct = std::min(size, stream_.content_left());
    const std::size_t after = direct == 0 || direct == stream_.content_left() ? sizeof scratch_ : 0;
    iovec iov[2] = {{out, direct}, {scratch_, after}};
    const int first = direct > 0 ? 0 : 1;
    ssize_t n = ::readv(fd_, iov + first, 2 - first);
    if (n > 0) {
      const std::size_t got = static_cast<std::size_t>(n);
      const std::size_t to_out = std::min(got, direct);
      stream_.took_content(to_out);
      pending_ = scratch_;
      pending_size_ = got - to_out;
      if (to_out > 0) {
        status = Status::Bytes;
        return to_out;
      }
      continue;
    }
    if (n == 0) {
      fail(400, "the web server closed the connection in the middle of the body");
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      status = Status::WouldBlock;
      return 0;
    } else if (errno != EINTR) {
      fail(400, std::string("reading the body failed: ") + std::strerror(errno));
    }
  }
}

} // namespace fcgi_host
