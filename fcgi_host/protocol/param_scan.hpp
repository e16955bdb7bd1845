#pragma once
// One pass over a request's params, when their stream has ended: each pair's lengths (both
// forms, FastCGI 1.0, 3.4) against the bytes sent, --max-params, the name (not empty, no NUL,
// no '='), the value (no NUL), the interpreted params (interpreted_params.hpp: one value however
// often sent; CONTENT_LENGTH a number within --max-body), the ids (the last value), and where
// every param is. The record guard runs it, and the request decoder turns its spans into views
// once the request is whole: the params are read once (a walk of the guard's checks and then
// the decoder's own walk cost twice as much).
//
// Pure logic over bytes, no allocation once the spans' storage has grown.
#include "app/wire_param.hpp"
#include "fcgi_host/protocol/interpreted_params.hpp"
#include "fcgi_host/protocol/records.hpp"

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace fcgi_host {

// One param in the params' bytes (the contents of the PARAMS records, one after the other).
// Offsets, not views: the connection's buffer may still move while the body arrives. The type
// app::Request reads its params through, so that the scan's storage is the request's params.
using ParamSpan = app::WireParam;

struct ParamScanLimits {
  std::size_t max_params = 0; // --max-params
  std::size_t max_body = 0;   // --max-body, for CONTENT_LENGTH
};

enum class ParamProblem {
  None,
  Truncated,   // a length runs past the params sent
  TooMany,     // more than max_params pairs
  BadName,     // an empty name, or one holding NUL or '='
  NulInValue,  // a value holding NUL
  TwoValues,   // an interpreted param sent twice with two values
  NotANumber,  // CONTENT_LENGTH neither empty, -1 nor a number of at most 18 digits
  OverMaxBody, // CONTENT_LENGTH above max_body (413)
};

struct ParamScanResult {
  ParamProblem problem = ParamProblem::None;
  records::NameValue pair;  // the param at fault (not for Truncated, TooMany)
  std::string_view earlier; // TwoValues: the value sent before
};

class ScannedParams {
public:
  std::size_t size = 0; // bytes of params scanned
  // Per kNotedParams entry: 1 + the index in spans() of its param (the first for an
  // interpreted param, whose values are one; the last for the ids), 0 when it was not sent.
  std::array<std::uint32_t, kNotNoted> noted{};
  bool repeated = false;         // an interpreted param came twice, with one value
  long long content_length = -1; // CONTENT_LENGTH as a number; -1: absent, empty or "-1"

  std::span<const ParamSpan> spans() const { return {slots_.data(), count_}; } // in the order sent
  // The params as the handler is given them: spans() but for the repeats of an interpreted param
  // (its one value sent again), which the handler sees once. spans() itself when nothing came
  // twice, the usual case.
  std::span<const ParamSpan> served() const {
    return repeated ? std::span<const ParamSpan>(served_) : spans();
  }
  // 1 + the index in served() of CONTENT_LENGTH, 0 when it was not sent.
  std::size_t served_content_length() const {
    return repeated ? served_content_length_ : noted[kContentLength];
  }
  void clear(); // keeps the storage
  records::NameValue pair(const char* base, std::size_t i) const {
    const ParamSpan& s = slots_[i];
    return {{base + s.at, s.name_size}, {base + s.at + s.name_size, s.value_size}};
  }

private:
  friend ParamScanResult scan_params(std::string_view, const ParamScanLimits&, ScannedParams&);
  // Grown to the most pairs a scan may find before it starts, then written without a check
  // per pair (a push_back per param cost more than the pair's own checks).
  std::vector<ParamSpan> slots_;
  std::size_t count_ = 0;
  // served() when an interpreted param came twice (rare): made after the scan, off the hot loop.
  void keep_served(const char* base);
  std::vector<ParamSpan> served_;
  std::size_t served_content_length_ = 0;
};

// Scans `data`, the params' bytes, into `out` (cleared first). Stops at the first pair at fault,
// in the order sent: the verdict is that of the first problem.
ParamScanResult scan_params(std::string_view data, const ParamScanLimits& limits,
                            ScannedParams& out);

} // namespace fcgi_host
