#include "fcgi_host/protocol/libfcgi_io.hpp"

#include "fcgi_host/net/socket_write.hpp"
#include "fcgi_host/protocol/records.hpp"
#include "fcgi_host/protocol/reference_decoder.hpp"

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

// Sources by the number libfcgi names. A static array in .bss: pages nobody touches cost no
// memory, and a lookup on the request path is one load. Writer keys count down from its end;
// the reference decoder uses descriptors, from its start.
constexpr int kMaxFd = 1 << 16;
std::atomic<Source*> sources[kMaxFd];
std::atomic<int> next_writer_key{kMaxFd - 1};

Source* source_for(int fd) {
  if (fd < 0 || fd >= kMaxFd) return nullptr;
  return sources[fd].load(std::memory_order_acquire);
}

} // namespace

void register_source(int key, Source* source) {
  if (key >= 0 && key < kMaxFd) sources[key].store(source, std::memory_order_release);
}

void unregister_source(int key, const Source* source) {
  if (key >= 0 && key < kMaxFd) {
    Source* expected = const_cast<Source*>(source);
    sources[key].compare_exchange_strong(expected, nullptr, std::memory_order_acq_rel);
  }
}

int writer_key() {
  return next_writer_key.fetch_sub(1, std::memory_order_relaxed);
}

bool write_to_client(Source& s, const char* buf, std::size_t len) {
  if (s.write_failed) return false;
  if (s.deliver) {
    if (!s.deliver(s.deliver_context, buf, len)) s.write_failed = true;
    return !s.write_failed;
  }
  if (s.backlog) {
    // Order on the wire: once something waits in the backlog, everything after it queues too.
    long sent = s.backlog->empty() ? fcgi_host::write_some(s.fd, buf, len) : 0;
    if (sent < 0) {
      s.write_failed = true;
      return false;
    }
    s.backlog->append(buf + sent, len - static_cast<std::size_t>(sent));
    return true;
  }
  if (!fcgi_host::write_all_until(s.fd, buf, len, s.write_deadline_ns)) {
    s.write_failed = true;
    return false;
  }
  return true;
}

bool write_stdout_records(Source& s, std::string_view before, const char* data, std::size_t len) {
  // Records of 32 KiB: a 64 KiB chunk is two, and 32 of them (1 MiB) go in one system call.
  constexpr std::size_t kRecord = 32 * 1024;
  constexpr int kRecordsPerCall = 32;
  if (s.deliver) {
    // A handler thread's response: the worker's loop writes it, in this order.
    if (!before.empty() && !write_to_client(s, before.data(), before.size())) return false;
    while (len > 0) {
      const std::size_t part = std::min(kRecord, len);
      char header[records::kHeaderSize];
      records::encode_header(header,
                             {records::kVersion, static_cast<std::uint8_t>(records::Type::Stdout),
                              s.request_id, static_cast<std::uint16_t>(part), 0});
      if (!write_to_client(s, header, sizeof header) || !write_to_client(s, data, part))
        return false;
      data += part;
      len -= part;
    }
    return true;
  }
  char headers[kRecordsPerCall][records::kHeaderSize];
  iovec iov[2 * kRecordsPerCall + 1];
  while (!s.write_failed) {
    int count = 0;
    if (!before.empty()) {
      iov[count++] = {const_cast<char*>(before.data()), before.size()};
      before = {};
    }
    for (int r = 0; r < kRecordsPerCall && len > 0; ++r) {
      const std::size_t part = std::min(kRecord, len);
      records::encode_header(headers[r],
                             {records::kVersion, static_cast<std::uint8_t>(records::Type::Stdout),
                              s.request_id, static_cast<std::uint16_t>(part), 0});
      iov[count++] = {headers[r], records::kHeaderSize};
      iov[count++] = {const_cast<char*>(data), part};
      data += part;
      len -= part;
    }
    if (count == 0) return true;
    iovec* rest = iov;
    if (s.backlog) {
      // Order on the wire: once something waits in the backlog, everything after it queues too.
      if (s.backlog->empty() && fcgi_host::writev_some(s.fd, rest, count) < 0) {
        s.write_failed = true;
        return false;
      }
      fcgi_host::append_iov(*s.backlog, rest, count);
    } else if (!fcgi_host::writev_all_until(s.fd, rest, count, s.write_deadline_ns)) {
      s.write_failed = true;
    }
  }
  return false;
}

bool self_test() {
  std::string framed;
  records::append_begin_request(framed, 1, records::Role::Responder);
  std::string pairs;
  records::append_name_value(pairs, "PING", "ok");
  records::append_stream(framed, records::Type::Params, 1, pairs);
  records::append_stream(framed, records::Type::Stdin, 1, {});
  ReferenceRequest r = decode_with_libfcgi(framed);
  // libfcgi puts FCGI_ROLE first, then the params sent.
  return r.accepted && r.closed_by_libfcgi && !r.params.empty() &&
         r.params.back() == std::pair<std::string, std::string>("PING", "ok");
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
  if (s->request_id != 0) {
    // Whole records, each from its header: the id of the request being answered goes in.
    for (std::size_t at = 0; at + fcgi_host::records::kHeaderSize <= len;
         at += fcgi_host::records::decode_header(buf + at).record_size()) {
      using fcgi_host::records::kRequestIdOffset;
      buf[at + kRequestIdOffset] = static_cast<char>(s->request_id >> 8);
      buf[at + kRequestIdOffset + 1] = static_cast<char>(s->request_id & 0xff);
    }
  }
  if (s->gather)
    s->gather->append(buf, len);
  else
    fcgi_host::libfcgi_io::write_to_client(*s, buf, len);
  return static_cast<int>(len); // a failure stays in the Source (see libfcgi_io.hpp)
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
