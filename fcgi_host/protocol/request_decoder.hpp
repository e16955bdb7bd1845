#pragma once
// Decodes one request that the record guard framed and checked into views over the
// connection's buffer: its params (name, value) and its body (the STDIN contents), with no copy
// and, once the vectors of DecodedRequest have grown, no allocation.
//
// It replaces libfcgi's request decoding (FCGX_Accept_r), which mallocs every param, stores each
// again as a "NAME=VALUE" string, and reads the body through FCGX_GetStr into another copy.
// libfcgi stays the reference decoder: a differential test (tests/unit/test_request_decoder.cpp)
// and the fuzzer (tests/fuzz/fuzz_request_adapter.cpp) feed the same bytes to both (and to a
// plain record walk, tests/support/walked_decoder.hpp) and require the same params, body and
// verdict (reference_decoder.hpp).
//
// Pure logic over bytes: no sockets, no libfcgi.
#include "fcgi_host/protocol/param_scan.hpp"
#include "fcgi_host/protocol/record_guard.hpp" // RequestFraming
#include "fcgi_host/protocol/records.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fcgi_host {

struct DecodedRequest {
  std::uint16_t id = 0;
  std::uint16_t role = 0;
  bool keep_conn = false;
  // The params: the guard's spans over params_base (must outlive this request's use).
  const ScannedParams* scanned = nullptr;
  const char* params_base = nullptr;
  std::vector<std::string_view> body; // the STDIN contents in order; views into the buffer
  std::size_t body_size = 0;

  std::size_t param_count() const { return scanned ? scanned->spans().size() : 0; }
  records::NameValue param(std::size_t i) const { return scanned->pair(params_base, i); }

  // Empties it, keeping the vectors' capacity.
  void clear();
};

enum class DecodeStatus {
  Whole,     // `out` holds the request
  Malformed, // a record past the request, or params other than the guard scanned
};

// The worker's path: the request the record guard framed, at data[0, size), decoded from where
// the guard found its records (framing.params_records, stdin_records) and its params' scan
// (framing.params, which must not be null): no record is framed again. Params sent in several
// PARAMS records are joined in place first (their contents moved together over the headers
// between them, so that a pair split across records is one view): `data` is modified inside
// [0, size) only. Malformed when a record lies past `size` or the params are not as
// many bytes as the guard scanned (bytes other than those the guard read).
DecodeStatus decode_guarded_request(char* data, std::size_t size, const RequestFraming& framing,
                                    DecodedRequest& out, std::string* why = nullptr);

} // namespace fcgi_host
