#pragma once
// libfcgi as the reference decoder: the records of one request are decoded by libfcgi
// (FCGX_Accept_r, reading them from memory through the host's OS_Read, libfcgi_io.hpp) exactly
// as it would decode them from a socket. The host decodes requests itself (request_decoder.hpp);
// the differential test, the fuzzer and the start-up self-test hold it to this.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fcgi_host {

struct ReferenceRequest {
  bool accepted = false; // libfcgi took the request (FCGX_Accept_r returned 0)
  std::vector<std::pair<std::string, std::string>> params; // in libfcgi's order: FCGI_ROLE
                                                           // first, then the params sent
  std::string body;                                        // STDIN, read to its end
  bool closed_by_libfcgi = false; // it called OS_IpcClose when freed (a sign OS_* are ours)
};

// Needs FCGX_Init (RequestCodec::init_library). Uses a socketpair with nothing in it: whatever
// libfcgi parsed came through the host's OS_Read.
ReferenceRequest decode_with_libfcgi(std::string_view records);

} // namespace fcgi_host
