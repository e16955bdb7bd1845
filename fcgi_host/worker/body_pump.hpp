#pragma once
// A large body the handler takes whole (Request::body()), gathered by the event loop as it
// arrives rather than in the connection's buffer: each read goes straight into the body's
// storage (body_source.hpp), so the body is copied once, from the kernel, and never again; a
// body above --spill-threshold goes to its temporary file in large writes. The connection's
// buffer keeps only the request's head. Memory per connection: the body up to the threshold.
#include "app/spill_buffer.hpp"
#include "fcgi_host/worker/body_source.hpp"

#include <memory>

namespace fcgi_host {

class BodyPump {
public:
  // `start.content_length` is declared (a pump is made only for such a body); the content the
  // record guard took already is appended to body() first. `storage`: memory an earlier body
  // left (its capacity is reused: fresh pages cost a fault and a clearing each), taken here.
  BodyPump(int fd, const StdinStream::Start& start, std::string_view buffered,
           std::size_t spill_threshold, app::SpillBuffer& storage);

  enum class Result { NeedMore, End, Failed };
  // Reads what the socket has (a bounded number of reads: other connections get their turn).
  Result pump();

  app::SpillBuffer& body() { return body_; }
  const BodySource& source() const { return source_; }
  std::size_t body_size() const { return source_.stream().body_size(); }
  // Memory held, for the worker's --max-buffered budget.
  std::size_t memory() const { return body_.memory().capacity() + (stage_ ? kStage : 0); }

private:
  void flush_stage();

  static constexpr std::size_t kStage = 256 * 1024; // a spilled body's reads and writes
  BodySource source_;
  app::SpillBuffer body_;
  std::size_t declared_;
  std::unique_ptr<char[]> stage_;
  std::size_t staged_ = 0; // bytes in stage_ not yet written
};

} // namespace fcgi_host
