// The request path allocates nothing in steady state: 1000 requests through the in-process host
// (the real worker loop, record guard, decoder, handler, libfcgi's writer, metrics), after a
// warm-up, make no allocation in the whole process.
//
// Allocations are counted by the allocator itself: with AddressSanitizer (the test build), its
// malloc hooks see every allocation, C (libfcgi) and C++ alike; without it, a replaced global
// operator new sees the C++ ones. The client here is a raw loop over prebuilt bytes and fixed
// buffers, so that it allocates nothing either.
#include "app/router.hpp"
#include "fcgi_host/protocol/records.hpp"
#include "fcgi_host/runners/in_process_host.hpp"

#include "fcgi_host/testing/fcgi_test_client.hpp"

#include <doctest/doctest.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define FCGI_HOST_COUNT_WITH_SANITIZER 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define FCGI_HOST_COUNT_WITH_SANITIZER 1
#endif
#endif

namespace {

std::atomic<bool> counting{false};
std::atomic<long> allocations{0};

void count_one() {
  if (counting.load(std::memory_order_relaxed)) allocations.fetch_add(1, std::memory_order_relaxed);
}

} // namespace

#ifdef FCGI_HOST_COUNT_WITH_SANITIZER
// From the sanitizer runtime (sanitizer/allocator_interface.h, which gcc does not install).
extern "C" int __sanitizer_install_malloc_and_free_hooks(void (*malloc_hook)(const volatile void*,
                                                                             std::size_t),
                                                         void (*free_hook)(const volatile void*));
namespace {
void on_malloc(const volatile void*, std::size_t) {
  count_one();
}
void on_free(const volatile void*) {}
const int hooks_installed = __sanitizer_install_malloc_and_free_hooks(on_malloc, on_free);
} // namespace
#else
void* operator new(std::size_t size) {
  count_one();
  if (void* p = std::malloc(size ? size : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
#endif

namespace {

namespace records = fcgi_host::records;

class Hello : public app::Router {
public:
  Hello() {
    get("/", [](const app::Request&, app::Response& res) { res.set_content("OK", "text/plain"); });
  }
};

// A request as a web server frames it (the test client's standard params, the ones nginx's stock
// fastcgi_params sends), built before counting starts.
std::string nginx_request(bool keep) {
  const fcgi_test::Params params = fcgi_test::standard_params(
      "GET", "/", 0, {{"HTTP_USER_AGENT", "Mozilla/5.0 (X11; Linux x86_64)"}});
  std::string out;
  records::append_begin_request(out, 1, records::Role::Responder, keep ? records::kKeepConn : 0);
  records::append_stream(out, records::Type::Params, 1, fcgi_test::encode_params(params));
  records::append_stream(out, records::Type::Stdin, 1, {});
  return out;
}

sockaddr_un unix_address(const std::string& address) {
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::string path = address.substr(5); // "unix:"
  REQUIRE(path.size() < sizeof sa.sun_path);
  std::memcpy(sa.sun_path, path.c_str(), path.size() + 1);
  return sa;
}

int connect_to(const sockaddr_un& sa) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  REQUIRE(::connect(fd, reinterpret_cast<const sockaddr*>(&sa), sizeof sa) == 0);
  timeval tv{10, 0}; // a hung host fails the test instead of hanging it
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

// One request and its whole response, with no allocation: true when END_REQUEST came with
// "Status: 200" before it.
bool round_trip(int fd, const std::string& request) {
  if (::write(fd, request.data(), request.size()) != static_cast<ssize_t>(request.size()))
    return false;
  char buf[4096];
  std::size_t have = 0;
  bool ok = false;
  for (;;) {
    ssize_t n = ::read(fd, buf + have, sizeof buf - have);
    if (n <= 0) return false;
    have += static_cast<std::size_t>(n);
    std::size_t at = 0;
    while (have - at >= records::kHeaderSize) {
      records::Header h = records::decode_header(buf + at);
      if (have - at < h.record_size()) break;
      if (h.is(records::Type::Stdout) && h.content_length >= 11)
        ok = ok || std::memcmp(buf + at + 8, "Status: 200", 11) == 0;
      if (h.is(records::Type::EndRequest)) return ok;
      at += h.record_size();
    }
    std::memmove(buf, buf + at, have - at);
    have -= at;
  }
}

// Allocations anywhere in the process while `requests` requests are served, after a warm-up.
// The worker serves one request at a time: once the response to one more request has come, the
// counted requests are wholly done (metrics, logs and all).
long allocations_over(int requests, bool keep, const std::string& address) {
  const std::string request = nginx_request(keep);
  const sockaddr_un sa = unix_address(address);
  int fd = keep ? connect_to(sa) : -1;
  int failed = 0;
  auto serve = [&](int n) {
    for (int i = 0; i < n; ++i) {
      if (!keep) fd = connect_to(sa);
      failed += !round_trip(fd, request);
      if (!keep) ::close(fd);
    }
  };
  serve(200); // warm-up: the buffers grow to their size
  allocations.store(0);
  counting.store(true);
  serve(requests);
  serve(1);
  counting.store(false);
  if (keep) ::close(fd);
  CHECK(failed == 0);
  return allocations.load();
}

} // namespace

TEST_CASE("request allocations: none across 1000 requests on a kept connection") {
  Hello hello;
  fcgi_host::InProcessHost host(hello, {}, true); // metrics on, as in a worker process
  CHECK(allocations_over(1000, true, host.address()) == 0);
}

TEST_CASE("request allocations: none across 1000 requests with a connection each") {
  Hello hello;
  fcgi_host::InProcessHost host(hello, {}, true);
  CHECK(allocations_over(1000, false, host.address()) == 0);
}
