#pragma once
// The body of a request whose handler reads it as it arrives (app::BodyReader): in today's
// worker, which runs one handler at a time, the reader reads that connection's socket itself
// while the handler runs (body_source.hpp: straight into the handler's buffer), waiting in
// poll() with the body's deadline. Memory stays bounded whatever the body's size.
//
// The seam: the handler sees only app::BodyReader. A worker whose event loop feeds handler
// threads gives them another implementation (bytes handed over through a queue) without a
// change on the handler's side.
#include "app/body_reader.hpp"
#include "fcgi_host/worker/body_source.hpp"
#include "fcgi_host/worker/connection_policy.hpp"

#include <cstdint>

namespace fcgi_host {

class StreamedBody : public app::BodyReader {
public:
  StreamedBody(int fd, const StdinStream::Start& start, std::string_view buffered,
               const ConnectionPolicy& policy, std::uint64_t body_start_ns);

  // Throws app::HttpError with the failure's status (413, 408, 400).
  std::size_t read(char* out, std::size_t size) override;

  // After the handler: reads and drops what it left of the body (bounded by --max-body and the
  // body's deadline). True when the body ended as it should: the connection may serve another
  // request, starting with leftover().
  bool finish();
  std::string_view leftover() const { return source_.leftover(); }
  bool aborted() const { return source_.aborted(); }
  // Why the body did not end as it should (for the log).
  const std::string& failure() const { return source_.reason(); }

private:
  bool wait_readable(); // false: the deadline passed (the source is failed then)

  int fd_;
  BodySource source_;
  const ConnectionPolicy& policy_;
  std::uint64_t body_start_ns_;
};

} // namespace fcgi_host
