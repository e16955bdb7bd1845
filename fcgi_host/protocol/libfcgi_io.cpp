#include "fcgi_host/protocol/libfcgi_io.hpp"

#include "fcgi_host/protocol/record_guard.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fastcgi.h>
#include <fcgiapp.h>
#include <fcgios.h>
#include <poll.h>
#include <string>
#include <sys/socket.h>
#include <unistd.h>

namespace fcgi_host::libfcgi_io {
namespace {
Source* current = nullptr;
}

void attach(Source* source) {
  current = source;
}
void detach() {
  current = nullptr;
}

bool write_all(int fd, const char* buf, std::size_t len, int timeout_ms) {
  while (len > 0) {
    ssize_t n = ::send(fd, buf, len, MSG_NOSIGNAL);
    if (n > 0) {
      buf += n;
      len -= static_cast<std::size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) {
      pollfd p{fd, POLLOUT, 0};
      int ready = ::poll(&p, 1, timeout_ms);
      if (ready == 0) {
        errno = ETIMEDOUT;
        return false;
      }
      if (ready < 0 && errno != EINTR) return false;
      continue;
    }
    return false;
  }
  return true;
}

bool self_test() {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, pair) != 0) return false;
  std::string request;
  records::append_header(request, FCGI_BEGIN_REQUEST, 1, 8);
  const char begin[8] = {0, FCGI_RESPONDER, 0};
  request.append(begin, sizeof begin);
  const char params[] = "\x04\x02PINGok";
  records::append_header(request, FCGI_PARAMS, 1, sizeof params - 1);
  request.append(params, sizeof params - 1);
  records::append_header(request, FCGI_PARAMS, 1, 0);
  records::append_header(request, FCGI_STDIN, 1, 0);

  Source source;
  source.fd = pair[0];
  source.data = request.data();
  source.size = request.size();
  attach(&source);
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
  detach();
  close(pair[0]);
  close(pair[1]);
  return ok;
}

} // namespace fcgi_host::libfcgi_io

using fcgi_host::libfcgi_io::current;

extern "C" {

int OS_Read(int fd, char* buf, size_t len) {
  if (!current || fd != current->fd) {
    errno = EBADF; // libfcgi reads only the current request
    return -1;
  }
  std::size_t n = std::min(len, current->size - current->pos);
  std::memcpy(buf, current->data + current->pos, n);
  current->pos += n;
  return static_cast<int>(n); // 0 past the end: libfcgi takes it as end of input
}

int OS_Write(int fd, char* buf, size_t len) {
  int timeout = current ? current->write_timeout_ms : 30'000;
  if (!fcgi_host::libfcgi_io::write_all(fd, buf, len, timeout)) {
    if (current) current->write_failed = true;
    return -1;
  }
  return static_cast<int>(len);
}

int OS_IpcClose(int fd, int /*shutdown*/) {
  if (current && fd == current->fd) {
    current->closed_by_libfcgi = true;
    return 0;
  }
  return fd >= 0 ? close(fd) : 0;
}

int OS_Accept(int /*listen_sock*/, int /*fail_on_intr*/, const char* /*webServerAddrs*/) {
  errno = EINVAL; // only reached when a request failed to parse: hand control back to the host
  return -1;
}

} // extern "C"
