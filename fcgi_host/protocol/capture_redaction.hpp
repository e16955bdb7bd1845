#pragma once
// A captured request (--capture-crashes) made fit to keep: its records cut to whole records
// within the capture's size, and the secrets in it redacted in place.
//
// Redacted: the values of the params whose names match a pattern, and of the form fields of an
// application/x-www-form-urlencoded body and of the query (QUERY_STRING, REQUEST_URI) whose
// names do. Each byte of such a value becomes 'x':
// the value keeps its length, so the request keeps its sizes (a crash that depends on a long
// cookie still replays), and a form body stays valid. A name too long to compare is redacted
// (fail closed).
//
// Pure functions over a byte buffer, without allocation, locks or library calls beyond plain
// loops: they run in a crashed worker's fatal-signal handler, over a private copy of the
// request's records (fcgi_host/worker/crash_capture.cpp), and are unit-tested directly.
#include <cstddef>
#include <span>
#include <string>
#include <string_view>

namespace fcgi_host::capture {

// The patterns redacted whatever --capture-redact adds.
inline constexpr std::string_view kBuiltinRedactions[] = {
    "HTTP_COOKIE", "HTTP_AUTHORIZATION", "HTTP_PROXY_AUTHORIZATION",
    "*PASSWORD*",  "*PASSWD*",           "*SECRET*",
    "*TOKEN*",     "*API_KEY*",
};

// `*` matches any run of bytes, `?` one byte; letters match in any case (ASCII).
bool name_matches(std::string_view pattern, std::string_view name);

// What fit_records() found in buf[0, size): the records to keep.
struct CaptureShape {
  std::size_t size = 0;       // bytes of whole records kept (the last one shortened if cut)
  std::size_t params_end = 0; // just after the empty PARAMS record; 0: the params are not whole
  std::size_t body_bytes = 0; // STDIN content bytes kept
  bool body_ended = false;    // the empty STDIN record is among them
  bool cut = false;           // a STDIN record was shortened (or left out) to fit
};

// Walks the records at the front of buf[0, size). A STDIN record that runs past the end is
// shortened to the content present (its header rewritten, its padding dropped); anything else
// incomplete ends the kept part.
CaptureShape fit_records(char* buf, std::size_t size);

// What redact_records() did.
struct RedactionReport {
  std::size_t redacted = 0; // values redacted
  // Their names, space-separated ("HTTP_COOKIE form:password"), cut to fit.
  char names[512]{};
  std::size_t names_size = 0;
  std::string_view names_text() const { return {names, names_size}; }
};

// Redacts buf[0, size) (whole records, as fit_records() keeps them) in place. The fields of
// QUERY_STRING and of REQUEST_URI's query are redacted as a form's are ("query:NAME").
void redact_records(char* buf, std::size_t size, std::span<const std::string> patterns,
                    RedactionReport& report);

// The values of the query fields of uri[0, size) (after its first '?') whose names match,
// redacted in place as redact_records() does (the status page's in-flight URIs). Returns how
// many.
std::size_t redact_uri_query(char* uri, std::size_t size, std::span<const std::string> patterns);

} // namespace fcgi_host::capture
