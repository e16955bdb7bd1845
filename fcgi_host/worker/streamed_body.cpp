#include "fcgi_host/worker/streamed_body.hpp"

#include "app/http_error.hpp"
#include "process_manager/clock.hpp"

#include <cerrno>
#include <poll.h>

namespace fcgi_host {

StreamedBody::StreamedBody(int fd, const StdinStream::Start& start, std::string_view buffered,
                           const ConnectionPolicy& policy, std::uint64_t body_start_ns)
    : fd_(fd), source_(fd, start, buffered), policy_(policy), body_start_ns_(body_start_ns) {}

std::size_t StreamedBody::read(char* out, std::size_t size) {
  for (;;) {
    BodySource::Status status;
    const std::size_t n = source_.read(out, size, status);
    switch (status) {
    case BodySource::Status::Bytes:
      return n;
    case BodySource::Status::End:
      return 0;
    case BodySource::Status::Failed:
      throw app::HttpError(source_.status(), source_.reason());
    case BodySource::Status::WouldBlock:
      wait_readable();
      break;
    }
  }
}

// Waits for more of the body until its deadline (--body-timeout, --body-min-rate: the rules of
// a body the worker gathers, connection_policy.hpp).
bool StreamedBody::wait_readable() {
  for (;;) {
    const std::uint64_t now = process_manager::monotonic_ns();
    const std::uint64_t deadline =
        policy_.body_deadline(now, body_start_ns_, source_.stream().body_size());
    if (now >= deadline) {
      source_.fail(408, "the request body stopped coming (--body-timeout, --body-min-rate)");
      return false;
    }
    pollfd p{fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>((deadline - now + 999'999) / 1'000'000));
    if (ready > 0 || (ready < 0 && errno != EINTR)) return true; // an error shows in the read
  }
}

bool StreamedBody::finish() {
  char drop[16 * 1024];
  for (;;) {
    BodySource::Status status;
    source_.read(drop, sizeof drop, status);
    if (status == BodySource::Status::End) return true;
    if (status == BodySource::Status::Failed) return false;
    if (status == BodySource::Status::WouldBlock && !wait_readable()) return false;
  }
}

} // namespace fcgi_host
