#pragma once
// multipart/form-data (RFC 7578): a streaming parser that takes the body in chunks split at any
// byte (a boundary may straddle two chunks), and the parts it yields. A part's data larger than
// the spill threshold goes to an unlinked temporary file (app::SpillBuffer).
//
// Lines must end in CRLF, as the RFC says and browsers and curl send. The preamble before the
// first boundary and the epilogue after the closing one are ignored. A body without its closing
// delimiter is an error, as are more than `max_parts` parts or a part header block larger than
// `max_header_bytes`.
#include "app/spill_buffer.hpp"

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace app {

struct MultipartPart {
  std::string name;         // the form field name (Content-Disposition name=)
  std::string filename;     // the file name as sent (filename*=UTF-8'' wins); empty if none.
                            // Untrusted: never use it as a path as it is.
  std::string content_type; // the part's Content-Type; empty when not sent
  std::vector<std::pair<std::string, std::string>> headers; // every part header, as sent
  SpillBuffer data;

  bool is_file() const { return !filename.empty(); }
  // The part's header value by name (case-insensitive); empty when absent.
  std::string_view header(std::string_view name) const;
};

struct MultipartLimits {
  std::size_t spill_threshold = SpillBuffer::kDefaultThreshold; // per part
  std::size_t max_parts = 1000;
  std::size_t max_header_bytes = 16 * 1024; // per part
};

// The boundary parameter of a multipart Content-Type ("multipart/form-data; boundary=xyz",
// quoted or not, other parameters before or after it); empty when there is none or the type is
// not multipart.
std::string multipart_boundary(std::string_view content_type);

class MultipartParser {
public:
  MultipartParser(std::string_view boundary, MultipartLimits limits = {});

  // Feeds the next bytes; false once the body is malformed (error() says why).
  bool feed(const char* data, std::size_t size);
  bool feed(std::string_view text) { return feed(text.data(), text.size()); }
  // After the last byte: true when the closing delimiter was seen and nothing failed.
  bool finish();
  const std::string& error() const { return error_; }
  std::vector<MultipartPart>& parts() { return parts_; }

private:
  enum class State { Preamble, AfterDelimiter, Headers, Data, Done, Failed };
  bool fail(std::string why);
  bool parse_headers(std::string_view block);
  void step();

  std::string delimiter_; // "\r\n--" + boundary
  MultipartLimits limits_;
  State state_ = State::Preamble;
  std::string pending_; // bytes not consumed yet (at most a delimiter plus one chunk)
  std::vector<MultipartPart> parts_;
  std::string error_;
};

} // namespace app
