#include "fcgi_host/protocol/param_scan.hpp"

#include <algorithm>
#include <cstring>

namespace fcgi_host {
namespace {

using records::NameValue;
using records::read_length;

// Both lengths of a pair: at once when both are one byte (the usual: names and values under 128
// bytes), else one after the other.
inline bool read_lengths(const unsigned char*& p, const unsigned char* end, std::size_t& name_size,
                         std::size_t& value_size) {
  if (end - p >= 2 && (p[0] | p[1]) < 128) {
    name_size = p[0];
    value_size = p[1];
    p += 2;
    return true;
  }
  return read_length(p, end, name_size) && read_length(p, end, value_size);
}

// The high bit of each zero byte of `x` (exact when tested for any: no false positives).
constexpr std::uint64_t zero_bytes(std::uint64_t x) {
  return (x - 0x0101010101010101ull) & ~x & 0x8080808080808080ull;
}

// Whether a name holds '=': eight bytes at a time, the words overlapping where the length is no
// multiple of 8, their results ORed (one branch per name, not one per word or byte).
inline bool holds_equals(const char* p, std::size_t n) {
  constexpr std::uint64_t equals = 0x3d3d3d3d3d3d3d3dull; // '=' in every byte
  auto at = [p](std::size_t i) { return zero_bytes(detail::load_word(p + i) ^ equals); };
  if (n < 8) {
    for (std::size_t i = 0; i < n; ++i)
      if (p[i] == '=') return true;
    return false;
  }
  std::uint64_t found = at(0) | at(n - 8); // all of a name of 8 to 16 bytes, the usual
  for (std::size_t i = 8; i + 8 < n; i += 8)
    found |= at(i);
  return found != 0;
}

// The next NUL byte at or after p, or end. NUL is looked for over all the params at once: the
// only NULs of a valid request are length bytes (an empty value's, the 4-byte form's), so one
// memchr finds the next and each pair just compares against it.
inline const char* next_zero(const char* p, const char* end) {
  const void* z = std::memchr(p, 0, static_cast<std::size_t>(end - p));
  return z ? static_cast<const char*>(z) : end;
}

// A fault's details go to `fault` only when there is one: building a result for every noted
// param cost more than noting it.
bool content_length(const NameValue& pair, const ParamScanLimits& limits, ScannedParams& out,
                    ParamScanResult& fault) {
  // Empty, or -1 (Caddy's "unknown length" for a chunked upload): the body is the STDIN stream
  // up to its empty record, bounded by --max-body like any other (FastCGI 1.0, 6.2: the stream
  // ends at its empty record whatever the params say).
  std::string_view v = pair.value;
  if (v.empty() || v == "-1") return true;
  if (v.size() > 18) {
    fault = {ParamProblem::NotANumber, pair, {}};
    return false;
  }
  long long n = 0;
  for (char c : v) {
    if (c < '0' || c > '9') {
      fault = {ParamProblem::NotANumber, pair, {}};
      return false;
    }
    n = n * 10 + (c - '0');
  }
  out.content_length = n;
  if (static_cast<unsigned long long>(n) <= limits.max_body) return true;
  fault = {ParamProblem::OverMaxBody, pair, {}};
  return false;
}

// The param at `index` (in the order sent) is kNotedParams[noted].
bool note(std::size_t noted, std::size_t index, const NameValue& pair, const char* base,
          const ParamScanLimits& limits, ScannedParams& out, ParamScanResult& fault) {
  const auto position = static_cast<std::uint32_t>(index + 1);
  std::uint32_t& slot = out.noted[noted];
  if (noted >= kNotInterpreted) { // an id: the last value wins, as in app::Request::param()
    slot = position;
    return true;
  }
  if (slot != 0) {
    // interpreted_params.hpp: one value, however often it is sent.
    std::string_view earlier = out.pair(base, slot - 1).value;
    if (earlier != pair.value) {
      fault = {ParamProblem::TwoValues, pair, earlier};
      return false;
    }
    out.repeated = true;
    return true;
  }
  slot = position;
  return noted != kContentLength || content_length(pair, limits, out, fault);
}

} // namespace

void ScannedParams::clear() {
  count_ = 0;
  size = 0;
  noted.fill(0);
  repeated = false;
  content_length = -1;
}

void ScannedParams::keep_served(const char* base) {
  served_.clear();
  served_content_length_ = 0;
  for (std::size_t i = 0; i < count_; ++i) {
    const std::size_t index = noted_param_index(pair(base, i).name);
    const bool first = index >= kNotInterpreted || noted[index] == i + 1;
    if (!first) continue; // a repeat of the one value noted before
    served_.push_back(slots_[i]);
    if (index == kContentLength) served_content_length_ = served_.size();
  }
}

ParamScanResult scan_params(std::string_view data, const ParamScanLimits& limits,
                            ScannedParams& out) {
  out.clear();
  out.size = data.size();
  // A pair takes two bytes at least: the storage for every pair there can be, grown once.
  // A copy: read through `limits` at every pair, since the stores into the spans might alias it.
  const std::size_t max_params = limits.max_params;
  const std::size_t most = std::min(max_params, data.size() / 2);
  if (out.slots_.size() < most) out.slots_.resize(most);
  ParamSpan* const spans = out.slots_.data();
  const char* const begin = data.data();
  const char* const end = begin + data.size();
  const auto* const uend = reinterpret_cast<const unsigned char*>(end);
  const char* zero = next_zero(begin, end);
  std::size_t count = 0;
  ParamScanResult result;
  for (const char* p = begin; p != end;) {
    std::size_t name_size = 0, value_size = 0;
    const auto* u = reinterpret_cast<const unsigned char*>(p);
    if (!read_lengths(u, uend, name_size, value_size)) {
      result.problem = ParamProblem::Truncated;
      break;
    }
    const char* name = reinterpret_cast<const char*>(u);
    const auto left = static_cast<std::size_t>(end - name);
    if (left < name_size || left - name_size < value_size) {
      result.problem = ParamProblem::Truncated;
      break;
    }
    if (count == max_params) {
      result.problem = ParamProblem::TooMany;
      break;
    }
    const char* value = name + name_size;
    p = value + value_size;
    if (name_size == 0 || holds_equals(name, name_size)) {
      result = {ParamProblem::BadName, {{name, name_size}, {value, value_size}}, {}};
      break;
    }
    if (zero < name) zero = next_zero(name, end); // NULs before `name` are length bytes
    if (zero < p) {
      result = {zero < value ? ParamProblem::BadName : ParamProblem::NulInValue,
                {{name, name_size}, {value, value_size}},
                {}};
      break;
    }
    spans[count] = {static_cast<std::size_t>(name - begin), static_cast<std::uint32_t>(name_size),
                    static_cast<std::uint32_t>(value_size)};
    if (std::size_t noted = noted_param_index({name, name_size}); noted != kNotNoted)
      if (!note(noted, count, {{name, name_size}, {value, value_size}}, begin, limits, out, result))
        break;
    ++count;
  }
  out.count_ = count;
  if (out.repeated) out.keep_served(begin);
  return result;
}

} // namespace fcgi_host
