#pragma once
// The file of a captured request (--capture-crashes; `fcgi-host replay FILE`): a few text lines
// that say where it comes from, an empty line, then the request's FastCGI records as the worker
// read them (redacted, maybe cut: protocol/capture_redaction.hpp), always a whole request: a
// body cut to fit ends with the empty STDIN record all the same.
//
//   fcgi-host request capture 1
//   time: 2026-12-01T18:33:39Z
//   pid: 11631
//   signal: 11 (SEGV)
//   request: 612 bytes, captured: 612 bytes
//   body: 0 bytes, whole
//   redacted: HTTP_COOKIE (values replaced by x, same length)
//
//   <BEGIN_REQUEST, PARAMS..., empty PARAMS, STDIN..., empty STDIN>
//
// The writer runs in a fatal-signal handler (worker/crash_capture.cpp) and formats the lines
// itself; this is the reader, for the replay.
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fcgi_host::capture {

inline constexpr std::string_view kFileMagic = "fcgi-host request capture 1";

class FileError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct CapturedRequest {
  std::vector<std::pair<std::string, std::string>> fields; // the text lines, "key: value"
  std::vector<std::pair<std::string, std::string>> params;
  std::string body;

  // The value of a text line or a param; empty when absent.
  std::string field(std::string_view key) const;
  std::string param(std::string_view name) const;
  // Replaces the param's value (or adds it).
  void set_param(std::string_view name, std::string_view value);
};

// Reads a capture file. Throws FileError saying what is wrong and at which byte: not a capture
// (no magic line), a header without its empty line, records cut short, out of order, or of
// another kind than a request's.
CapturedRequest read_capture(std::string_view file);

// The request again, as records: BEGIN_REQUEST (responder, no keep-conn), the params, the body.
std::string encode_request(const CapturedRequest& request);

} // namespace fcgi_host::capture
