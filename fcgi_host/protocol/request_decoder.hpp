#pragma once
// Decodes one request that the record guard framed and checked into views over the
// connection's buffer: its params (name, value) and its body (the STDIN contents), with no copy
// and, once the vectors of DecodedRequest have grown, no allocation.
//
// It replaces libfcgi's request decoding (FCGX_Accept_r), which mallocs every param, stores each
// again as a "NAME=VALUE" string, and reads the body through FCGX_GetStr into another copy.
// libfcgi stays the reference decoder: a differential test (tests/unit/test_request_decoder.cpp)
// and the fuzzer (tests/fuzz/fuzz_request_adapter.cpp) feed the same bytes to both and require
// the same params, body and verdict (reference_decoder.hpp).
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
  std::vector<records::NameValue> params; // in the order sent; views into the buffer
  // Decoded with the guard's scan: the params are its spans over params_base, and `params` stays
  // empty (param_count() and param() read either form).
  const ScannedParams* scanned = nullptr;
  const char* params_base = nullptr;
  std::vector<std::string_view> body; // the STDIN contents in order; views into the buffer
  std::size_t body_size = 0;

  std::size_t param_count() const { return scanned ? scanned->spans().size() : params.size(); }
  records::NameValue param(std::size_t i) const {
    return scanned ? scanned->pair(params_base, i) : params[i];
  }

  // Empties it, keeping the vectors' capacity.
  void clear();
};

struct DecodeLimits {
  std::size_t max_params = 0; // 0: no limit (the guard applies --max-params before)
};

enum class DecodeStatus {
  Whole,     // `out` holds the request
  Malformed, // not one request of whole records: BEGIN_REQUEST, PARAMS, their empty end, STDIN,
             // its empty end, one request id; or a pair whose lengths run past the params
  TooManyParams,
};

// Decodes the records of one request at data[0, size). Params sent in several PARAMS records
// are joined in place first (their contents moved together over the headers between them, so
// that a pair split across records is one view): `data` is modified inside [0, size) only. The
// views stay valid as long as those bytes do. `why` (optional) says what was malformed.
DecodeStatus decode_request(char* data, std::size_t size, const DecodeLimits& limits,
                            DecodedRequest& out, std::string* why = nullptr);

// The same for a request the record guard framed and checked: its params are not read again but
// taken from the guard's one pass over them (`scanned`, spans into the same bytes once joined;
// out.scanned points to it, which must outlive `out`'s use). Malformed also when the params are
// not as many bytes as the guard scanned.
DecodeStatus decode_scanned_request(char* data, std::size_t size, const ScannedParams& scanned,
                                    DecodedRequest& out, std::string* why = nullptr);

// The worker's path: the request the record guard framed, at data[0, size), decoded from where
// the guard found its records (framing.params_records, stdin_records) and its params' scan
// (framing.params, which must not be null): no record is framed again. The PARAMS records are
// joined in place as above. Malformed when a record lies past `size` or the params are not as
// many bytes as the guard scanned (bytes other than those the guard read).
DecodeStatus decode_guarded_request(char* data, std::size_t size, const RequestFraming& framing,
                                    DecodedRequest& out, std::string* why = nullptr);

} // namespace fcgi_host
