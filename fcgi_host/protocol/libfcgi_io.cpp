#include "fcgi_host/protocol/libfcgi_io.hpp"

#include "fcgi_host/net/socket_write.hpp"
#include "fcgi_host/protocol/records.hpp"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <fcgiapp.h>
#include <fcgios.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>

namespace fcgi_host::libfcgi_io {
namespace {

// Sources by fd. A static array in .bss: pages nobody touches cost no memory, and a lookup on
// the request path is one load. Descriptors past its end are not served by libfcgi (the worker
// keeps its connections below it; see kMaxSourceFd in request_codec.hpp's users).
constexpr int kMaxFd = 1 << 16;
std::atomic<Source*> sources[kMaxFd];

Source* source_for(int fd) {
  if (fd < 0 || fd >= kMaxFd) return nullptr;
  return sources[fd].load(std::memory_order_acquire);
}

} // namespace

void register_source(Source* source) {
  if (source->fd >= 0 && source->fd < kMaxFd)
    sources[source->fd].store(source, std::memory_order_release);
}

void unregister_source(const Source* source) {
  if (source->fd >= 0 && source->fd < kMaxFd) {
    Source* expected = const_cast<Source*>(source);
    sources[source->fd].compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel);
  }
}

bool self_test() {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) != 0) return false;
  std::string framed;
  records::append_begin_request(framed, 1, records::Role::Responder);
  std::string pairs;
  records::append_name_value(pairs, "PING", "ok");
  records::append_stream(framed, records::Type::Params, 1, pairs);
  records::append_stream(framed, records::Type::Stdin, 1, {});

  Source source;
  source.fd = pair[0];
  source.data = framed.data();
  source.size = framed.size();
  register_source(&source);
  FCGX_Request r;
  FCGX_InitRequest(&r, -1, 0);
  r.ipcFd = pair[0];
  r.keepConnection = 1; // FCGX_Accept_r first finishes the previous request: not a close
  bool ok = FCGX_Accept_r(&r) == 0 && r.envp != nullptr && !source.closed_by_libfcgi;
  if (ok) {
    const char* value = FCGX_GetParam("PING", r.envp);
    ok = value && std::strcmp(value, "ok") == 0;
  }
  FCGX_Free(&r, 1); // must reach our OS_IpcClose
  ok = ok && source.closed_by_libfcgi;
  unregister_source(&source);
  close(pair[0]);
  close(pair[1]);
  return ok;
}

} // namespace fcgi_host::libfcgi_io

using fcgi_host::libfcgi_io::Source;
using fcgi_host::libfcgi_io::source_for;

extern "C" {

int OS_Read(int fd, char* buf, size_t len) {
  Source* s = source_for(fd);
  if (!s) {
    errno = EBADF; // libfcgi reads only registered requests
    return -1;
  }
  std::size_t n = std::min(len, s->size - s->pos);
  std::memcpy(buf, s->data + s->pos, n);
  s->pos += n;
  return static_cast<int>(n); // 0 past the end: libfcgi takes it as end of input
}

int OS_Write(int fd, char* buf, size_t len) {
  Source* s = source_for(fd);
  if (!s) {
    errno = EBADF;
    return -1;
  }
  if (s->write_failed) return -1;
  if (s->backlog) {
    // Order on the wire: once something waits in the backlog, everything after it queues too.
    long sent = s->backlog->empty() ? fcgi_host::write_some(fd, buf, len) : 0;
    if (sent < 0) {
      s->write_failed = true;
      return -1;
    }
    s->backlog->append(buf + sent, len - static_cast<std::size_t>(sent));
    return static_cast<int>(len);
  }
  if (!fcgi_host::write_all_until(fd, buf, len, s->write_deadline_ns)) {
    s->write_failed = true;
    return -1;
  }
  return static_cast<int>(len);
}

int OS_IpcClose(int fd, int /*shutdown*/) {
  if (Source* s = source_for(fd)) {
    s->closed_by_libfcgi = true;
    return 0;
  }
  return fd >= 0 ? close(fd) : 0;
}

int OS_Accept(int /*listen_sock*/, int /*fail_on_intr*/, const char* /*webServerAddrs*/) {
  errno = EINVAL; // only reached when a request failed to parse: hand control back to the host
  return -1;
}

} // extern "C"
