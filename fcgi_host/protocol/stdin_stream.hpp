#pragma once
// The STDIN records of one request read as a byte stream, for a body the handler reads as it
// arrives (app::BodyReader): the records' headers and padding are taken here, their content is
// left where the caller reads it, straight into the handler's buffer. The guard's checks of a
// body apply, once per record (never per byte): the request's id, --max-body, and the length
// CONTENT_LENGTH declared; an FCGI_ABORT_REQUEST of the request ends it.
//
// Pure logic over bytes: no sockets (worker/streamed_body.cpp reads the socket), unit-tested and
// fuzzed directly.
#include "fcgi_host/protocol/records.hpp"

#include <cstddef>
#include <cstdint>
#include <string>

namespace fcgi_host {

class StdinStream {
public:
  struct Start {
    std::uint16_t request_id = 0;
    std::size_t body_so_far = 0;   // STDIN content the record guard already took
    long long content_length = -1; // as declared; -1 when unknown
    std::size_t max_body = 0;      // --max-body
  };
  explicit StdinStream(const Start& start) : start_(start), body_size_(start.body_so_far) {}

  enum class State {
    Framing, // a header or padding is next: take_framing()
    Content, // content_left() bytes of a record are next: read them, then took_content()
    End,     // the empty STDIN record came, with the declared length: the body is whole
    Aborted, // FCGI_ABORT_REQUEST for this request
    Refused, // over a limit or not the declared length: answer status(), reason() says why
    Broken,  // not a record of this request's body: close the connection, reason() says why
  };
  State state() const { return state_; }
  bool done() const { return state_ != State::Framing && state_ != State::Content; }

  std::size_t content_left() const { return state_ == State::Content ? content_left_ : 0; }
  // The caller took `n` (at most content_left()) bytes of content.
  void took_content(std::size_t n);
  // Takes header and padding bytes from data[0, size): how many it used. It stops where content
  // begins (State::Content) or the stream ends; bytes after the end are the caller's (the next
  // request on the connection).
  std::size_t take_framing(const char* data, std::size_t size);

  // Content taken so far, with what the guard took before the stream began.
  std::size_t body_size() const { return body_size_; }
  int status() const { return status_; }
  const std::string& reason() const { return reason_; }

private:
  void header_complete();
  void refuse(int status, std::string reason);
  void broken(std::string reason);

  Start start_;
  State state_ = State::Framing;
  char header_[records::kHeaderSize] = {};
  std::size_t header_have_ = 0;
  std::size_t content_left_ = 0;
  std::size_t skip_left_ = 0;   // padding, or a dropped record's content and padding
  bool end_after_skip_ = false; // the empty STDIN came: the stream ends after its padding
  std::size_t body_size_ = 0;
  int status_ = 0;
  std::string reason_;
};

} // namespace fcgi_host
