#pragma once
// A request's STDIN content read from its connection: first the bytes already read past what the
// record guard framed, then the socket. Each read goes straight into the caller's buffer (readv:
// the rest of the record's content there, the next record's header into 8 bytes of the
// source's own), so the content is copied once, from the kernel;
// the records are checked once each (protocol/stdin_stream.hpp). Never waits: the event loop
// (body_pump.hpp) and the handler's blocking reader (streamed_body.hpp) wait each their way.
#include "fcgi_host/protocol/stdin_stream.hpp"

#include <cstddef>
#include <string>
#include <string_view>

namespace fcgi_host {

class BodySource {
public:
  // `buffered` stays valid (the connection's buffer, unchanged) until it was read.
  BodySource(int fd, const StdinStream::Start& start, std::string_view buffered);
  BodySource(const BodySource&) = delete; // pending_ may point into scratch_
  BodySource& operator=(const BodySource&) = delete;

  enum class Status {
    Bytes,      // the return value is the bytes read
    WouldBlock, // nothing now: wait until the socket is readable
    End,        // the body ended as it should
    Failed,     // over a limit, cut short, aborted or broken: status() and reason() say which
  };
  // Up to `size` next bytes of content into `out`, without waiting.
  std::size_t read(char* out, std::size_t size, Status& status);

  const StdinStream& stream() const { return stream_; }
  // Bytes read from the socket and not taken yet: more can be read without waiting.
  bool has_pending() const { return pending_size_ > 0; }
  // The HTTP status a failure is answered with (400, 408, 413), and why.
  int status() const { return status_; }
  const std::string& reason() const { return reason_; }
  bool aborted() const { return stream_.state() == StdinStream::State::Aborted; }
  // Bytes read past the end of the body (the start of what follows on the connection).
  std::string_view leftover() const { return {pending_, pending_size_}; }
  // Marks the source failed (a deadline the caller keeps).
  void fail(int status, std::string why);

private:
  int fd_;
  StdinStream stream_;
  char scratch_[records::kHeaderSize]; // a read's bytes past a record's content: its next header
  const char* pending_; // read, not yet taken: in the connection's buffer or in scratch_
  std::size_t pending_size_;
  int status_ = 0;
  std::string reason_;
};

} // namespace fcgi_host
