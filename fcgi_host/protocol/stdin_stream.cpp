#include "fcgi_host/protocol/stdin_stream.hpp"

#include <algorithm>
#include <cstring>

namespace fcgi_host {

using records::Type;

void StdinStream::refuse(int status, std::string reason) {
  state_ = State::Refused;
  status_ = status;
  reason_ = std::move(reason);
}

void StdinStream::broken(std::string reason) {
  state_ = State::Broken;
  reason_ = std::move(reason);
}

void StdinStream::took_content(std::size_t n) {
  content_left_ -= std::min(n, content_left_);
  if (content_left_ == 0 && state_ == State::Content) state_ = State::Framing;
}

std::size_t StdinStream::take_framing(const char* data, std::size_t size) {
  std::size_t used = 0;
  while (state_ == State::Framing && used < size) {
    if (skip_left_ > 0) {
      const std::size_t n = std::min(skip_left_, size - used);
      skip_left_ -= n;
      used += n;
      if (skip_left_ == 0 && end_after_skip_) state_ = State::End;
      continue;
    }
    const std::size_t n = std::min(records::kHeaderSize - header_have_, size - used);
    std::memcpy(header_ + header_have_, data + used, n);
    header_have_ += n;
    used += n;
    if (header_have_ == records::kHeaderSize) header_complete();
  }
  return used;
}

// One header, checked as the record guard checks a STDIN record (record_guard.cpp), once per
// record.
void StdinStream::header_complete() {
  header_have_ = 0;
  const records::Header h = records::decode_header(header_);
  if (h.version != records::kVersion) return broken("FastCGI version " + std::to_string(h.version));
  if (h.request_id == records::kNullRequestId) {
    // A management record in the middle of a body (no web server sends one): dropped.
    skip_left_ = h.content_length + h.padding;
    return;
  }
  if (h.request_id != start_.request_id)
    return broken(std::string(records::type_name(h.type)) + " record for request " +
                  std::to_string(h.request_id) + " while streaming the body of request " +
                  std::to_string(start_.request_id));
  if (h.is(Type::AbortRequest)) {
    state_ = State::Aborted;
    return;
  }
  if (!h.is(Type::Stdin))
    return broken(std::string("unexpected ") + records::type_name(h.type) + " record in the body");
  const long long declared = start_.content_length;
  if (h.content_length == 0) {
    if (declared >= 0 && body_size_ != static_cast<std::size_t>(declared))
      return refuse(400, "a body of " + std::to_string(body_size_) + " bytes for CONTENT_LENGTH " +
                             std::to_string(declared));
    // Ends after its padding (what follows is the caller's: the next request).
    skip_left_ = h.padding;
    if (skip_left_ == 0)
      state_ = State::End;
    else
      end_after_skip_ = true;
    return;
  }
  if (body_size_ + h.content_length > start_.max_body)
    return refuse(413,
                  "request body over --max-body (" + std::to_string(start_.max_body) + " bytes)");
  body_size_ += h.content_length;
  if (declared >= 0 && body_size_ > static_cast<std::size_t>(declared))
    return refuse(400, "a body longer than CONTENT_LENGTH " + std::to_string(declared));
  content_left_ = h.content_length;
  skip_left_ = h.padding;
  state_ = State::Content;
}

} // namespace fcgi_host
