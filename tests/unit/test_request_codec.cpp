// Setting libfcgi up leaves the process's signal dispositions as they were: libfcgi's TERM and
// USR1 handlers only set a flag the host never reads, so a stop caught by one would be lost.
#include "fcgi_host/protocol/request_codec.hpp"

#include <doctest/doctest.h>

#include <csignal>
#include <string>

namespace {

using Handler = void (*)(int);

Handler handler_of(int sig) {
  struct sigaction now {};
  sigaction(sig, nullptr, &now);
  return now.sa_handler;
}

} // namespace

TEST_CASE("libfcgi set-up: TERM and USR1 keep the dispositions the process gave them") {
  // (doctest has a TERM handler of its own: what matters is that it is still the one.)
  const Handler term = handler_of(SIGTERM);
  const bool usr1_default = handler_of(SIGUSR1) == SIG_DFL; // libfcgi replaces only a default
  REQUIRE(usr1_default);
  std::string error;
  REQUIRE(fcgi_host::RequestCodec::init_library(error));
  const bool term_kept = handler_of(SIGTERM) == term;
  const bool usr1_kept = handler_of(SIGUSR1) == SIG_DFL;
  CHECK(term_kept);
  CHECK(usr1_kept);
}
