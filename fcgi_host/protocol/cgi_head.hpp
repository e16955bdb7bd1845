#pragma once
// The CGI head of a FastCGI response ("Status: 404 Not Found\r\nName: value\r\n\r\nbody"), for
// those who write or read one outside libfcgi: the error pages the host answers itself, the
// master's status server, the status/ping client commands and the test client.
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fcgi_host::cgi {

// "Status: 404 Not Found\r\n"
void append_status_line(std::string& out, int status);
// "Name: value\r\n"
void append_header_line(std::string& out, std::string_view name, std::string_view value);

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// The whole head, the one writer of it (a handler's response, the master's status page): the
// status line, each header, "Content-Length: N" when `content_length` is given and `headers` has
// none, and the empty line. For 1xx and 204 no Content-Length at all (the handler's is dropped),
// for 304 only the handler's (app::status_without_content). False when a header is not
// valid_header(): what was appended must not be sent (a handler's name or value could forge a
// header); answer 500 instead.
[[nodiscard]] bool append_head(std::string& out, int status, const HeaderList& headers,
                               std::optional<std::size_t> content_length);

// A header that may be sent (RFC 9110): its name a token (5.6.2), not empty; its value without
// CR, LF or NUL (5.5).
bool valid_header(std::string_view name, std::string_view value);

// Header names compare case-insensitively (RFC 9110, 5.1).
bool same_header_name(std::string_view a, std::string_view b);

struct Head {
  bool found = false; // false: no empty line ends a head; everything is body
  int status = 0;     // from "Status:", 0 when absent (a web server then answers 200)
  std::vector<std::pair<std::string_view, std::string_view>> headers; // in order, without Status
  std::string_view body;
};

// Splits CGI output at the first empty line ("\r\n\r\n", or leniently "\n\n"); header names are
// matched case-insensitively, leading blanks of values dropped. Views into `output`.
Head parse_head(std::string_view output);

} // namespace fcgi_host::cgi
