#include "fcgi_host/protocol/client_exchange.hpp"

#include "fcgi_host/sys_error.hpp"

#include <algorithm>
#include <cerrno>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

namespace fcgi_host {
namespace {

// A waiting poll wakes this often to ask StillWaiting.
constexpr int kPollSliceMs = 100;

void send_all(int fd, std::string_view peer, std::string_view bytes,
              SteadyClock::time_point deadline) {
  for (std::size_t sent = 0; sent < bytes.size();) {
    const ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR)
      throw ExchangeError(sys_error("send", std::string(peer)));
    pollfd p{fd, POLLOUT, 0};
    if (::poll(&p, 1, poll_timeout_ms(deadline)) <= 0) throw ExchangeError("timed out sending");
  }
}

} // namespace

void exchange(int fd, std::string_view peer, std::string_view request,
              SteadyClock::time_point deadline, const OnRecord& on_record,
              const StillWaiting& still_waiting) {
  send_all(fd, peer, request, deadline);
  records::RecordReader in;
  for (;;) {
    for (records::RecordView r; in.next(r);) {
      on_record(r);
      if (r.header.is(records::Type::EndRequest)) return;
    }
    const int left = poll_timeout_ms(deadline);
    if (left == 0) throw ExchangeError("no answer in time");
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, still_waiting ? std::min(left, kPollSliceMs) : left);
    if (ready < 0 && errno != EINTR) throw ExchangeError(sys_error("poll", std::string(peer)));
    if (ready <= 0) {
      std::string why;
      if (still_waiting && !still_waiting(why)) throw ExchangeError(why);
      continue;
    }
    char buf[16384];
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n == 0) throw ExchangeError("connection closed before the end of the answer");
    if (n < 0 && errno != EAGAIN && errno != EINTR)
      throw ExchangeError(sys_error("read", std::string(peer)));
    if (n > 0) in.append(std::string_view(buf, static_cast<std::size_t>(n)));
  }
}

std::string exchange_stdout(int fd, std::string_view peer, std::string_view request,
                            SteadyClock::time_point deadline) {
  std::string out;
  exchange(fd, peer, request, deadline, [&out](const records::RecordView& r) {
    if (r.header.is(records::Type::Stdout)) out.append(r.content);
  });
  return out;
}

} // namespace fcgi_host
