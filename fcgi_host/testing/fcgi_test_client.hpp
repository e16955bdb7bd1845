#pragma once
// fcgi_test: a small raw FastCGI 1.0 client for tests.
//
// It writes and reads the records itself (no libfcgi), so it can talk to any FastCGI responder the
// way a web server does, and can also send what no web server would (for hostile tests).
//
//   auto c = fcgi_test::Client::connect("unix:/run/app.sock");
//   fcgi_test::Response r = c.request("GET", "/hello?x=1");
//   CHECK(r.status == 200); CHECK(r.body == "OK");
//
// Every read and write is bounded by a timeout. High-level calls throw fcgi_test::TimeoutError when
// the peer is silent too long and fcgi_test::Error for everything else; a peer that closes the
// connection before END_REQUEST gives a Response with `ended == false`. Raw reads return an
// IoStatus instead, so a test can tell "closed by peer" from "timed out" without exceptions.
#include "fcgi_host/protocol/records.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fcgi_test {

using Millis = std::chrono::milliseconds;
inline constexpr Millis kDefaultTimeout{5000};

// ---- Protocol constants (FastCGI 1.0 specification) --------------------------------------------
// The client speaks the host's own codec (fcgi_host/protocol/records.hpp); these are its names.

inline constexpr std::uint8_t kVersion1 = fcgi_host::records::kVersion;
inline constexpr std::size_t kHeaderSize = fcgi_host::records::kHeaderSize;
inline constexpr std::size_t kMaxContent = fcgi_host::records::kMaxContent;

using RecordType = fcgi_host::records::Type;
using Role = fcgi_host::records::Role;

inline constexpr std::uint8_t kKeepConn =
    fcgi_host::records::kKeepConn; // BEGIN_REQUEST flag FCGI_KEEP_CONN

enum ProtocolStatus : std::uint8_t {
  kRequestComplete = static_cast<std::uint8_t>(fcgi_host::records::ProtocolStatus::RequestComplete),
  kCantMpxConn = static_cast<std::uint8_t>(fcgi_host::records::ProtocolStatus::CantMpxConn),
  kOverloaded = static_cast<std::uint8_t>(fcgi_host::records::ProtocolStatus::Overloaded),
  kUnknownRole = static_cast<std::uint8_t>(fcgi_host::records::ProtocolStatus::UnknownRole),
};

const char* to_string(RecordType type);

// ---- Errors ------------------------------------------------------------------------------------

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};
struct TimeoutError : Error {
  using Error::Error;
};

// ---- Encoding and decoding ---------------------------------------------------------------------

using Params = std::vector<std::pair<std::string, std::string>>;

// One record: 8-byte header, content, padding. Content longer than 65535 bytes is an Error.
std::string encode_record(RecordType type, std::uint16_t request_id, std::string_view content,
                          std::uint8_t padding = 0);
// Same, for an arbitrary type byte (e.g. an unknown record type for a hostile test).
std::string encode_record(std::uint8_t type, std::uint16_t request_id, std::string_view content,
                          std::uint8_t padding = 0, std::uint8_t version = kVersion1);
// A whole stream (PARAMS, STDIN, DATA): `data` cut into records of at most `chunk` bytes, then the
// empty record that ends the stream.
std::string encode_stream(RecordType type, std::uint16_t request_id, std::string_view data,
                          std::size_t chunk = kMaxContent);
// Name-value pairs; each length takes 1 byte below 128, else 4 bytes with the high bit set.
std::string encode_name_value(std::string_view name, std::string_view value);
std::string encode_params(const Params& params);
// Decodes name-value pairs; throws Error on a truncated or malformed body.
Params decode_params(std::string_view body);
// The 8-byte BEGIN_REQUEST body: role, flags, 5 reserved bytes.
std::string begin_request_body(Role role = Role::Responder, std::uint8_t flags = 0);

struct EndRequest {
  std::uint32_t app_status = 0;
  std::uint8_t protocol_status = 0;
};
EndRequest decode_end_request(std::string_view body);

// ---- Requests and responses --------------------------------------------------------------------

// The params nginx's fastcgi_params would send for this request (REQUEST_METHOD, REQUEST_URI,
// SCRIPT_NAME, QUERY_STRING, DOCUMENT_URI, SERVER_PROTOCOL, CONTENT_LENGTH, CONTENT_TYPE,
// REMOTE_ADDR,
// ...). `extra` entries replace the standard ones of the same name, the others are appended; pass
// HTTP headers as HTTP_* params, as nginx does.
Params standard_params(std::string_view method, std::string_view uri, std::size_t content_length,
                       const Params& extra = {});

using Headers = std::vector<std::pair<std::string, std::string>>;

struct Response {
  int status = 0;          // from the "Status:" header; 200 when absent, as a web server does
  Headers headers;         // in order, without Status
  std::string body;        // STDOUT after the header block
  std::string stdout_raw;  // all STDOUT bytes, as sent
  std::string stderr_text; // all STDERR bytes
  std::uint32_t app_status = 0;
  std::uint8_t protocol_status = 0;
  bool ended = false; // END_REQUEST seen; false when the peer closed the connection first

  // First header of that name, case-insensitive.
  std::optional<std::string> header(std::string_view name) const;
  // All headers of that name, case-insensitive, in order.
  std::vector<std::string> header_values(std::string_view name) const;
};

// Splits CGI-style output ("Status: 200 OK\r\nName: value\r\n\r\nbody"; bare \n also accepted) into
// status, headers and body. A missing header block leaves everything in body with status 0.
void parse_cgi_output(std::string_view out, Response& response);

struct Request {
  std::string method = "GET";
  std::string uri = "/";
  std::string body;
  Params extra_params;          // merged into standard_params()
  std::optional<Params> params; // if set, sent as is instead of standard_params()
  std::uint16_t id = 0;         // 0: the client picks the next free id
  Role role = Role::Responder;
  std::optional<bool> keep_conn; // default: the client's keep_conn()
};

// ---- Raw I/O results ---------------------------------------------------------------------------

enum class IoStatus { Ok, Closed, TimedOut };
const char* to_string(IoStatus status);

struct Record {
  std::uint8_t version = kVersion1;
  RecordType type = RecordType::UnknownType; // may hold a value outside the enum
  std::uint16_t request_id = 0;
  std::string content; // without padding
};

struct RecordResult {
  IoStatus status = IoStatus::Ok; // Ok: `record` is valid
  Record record;
};

struct ReadAllResult {
  IoStatus status = IoStatus::Closed; // Closed: the peer closed; TimedOut: it was still open
  std::string data;
};

// ---- Connections -------------------------------------------------------------------------------

// Connects to "unix:/path", "/path", "host:port", "[v6]:port" or ":port" (loopback); returns the
// fd. Throws Error naming the address on failure.
int connect_socket(std::string_view address, Millis timeout = kDefaultTimeout);

class Client {
public:
  static Client connect(std::string_view address, Millis timeout = kDefaultTimeout);
  explicit Client(int fd); // adopts a connected socket
  Client(Client&& other) noexcept;
  Client& operator=(Client&& other) noexcept;
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;
  ~Client();

  // Send one request and wait for its END_REQUEST (or the peer's close).
  Response request(std::string_view method, std::string_view uri, std::string_view body = {},
                   const Params& extra_params = {});
  Response request(const Request& request);

  // Pipelining: send requests first, read their responses later, in any order. Records of other
  // requests met while waiting are kept for them.
  std::uint16_t send_request(const Request& request);
  Response read_response(std::uint16_t request_id);

  // FCGI_GET_VALUES (e.g. FCGI_MAX_CONNS, FCGI_MAX_REQS, FCGI_MPXS_CONNS) → GET_VALUES_RESULT
  // pairs.
  std::map<std::string, std::string> get_values(const std::vector<std::string>& names);
  // FCGI_ABORT_REQUEST for a request sent earlier.
  void abort_request(std::uint16_t request_id);

  // Raw access for hostile tests. send_raw throws Error if the peer resets or stops reading.
  void send_raw(std::string_view bytes);
  RecordResult read_record(Millis timeout);
  // Everything until the peer closes (or the timeout), including bytes already buffered.
  ReadAllResult read_until_closed(Millis timeout);

  // FCGI_KEEP_CONN on requests (default true: several requests per connection).
  void set_keep_conn(bool on) { keep_conn_ = on; }
  bool keep_conn() const { return keep_conn_; }
  // Bound on each wait for the peer in request()/read_response()/send (default 5 s).
  void set_timeout(Millis timeout) { timeout_ = timeout; }
  Millis timeout() const { return timeout_; }

  int fd() const { return fd_; }
  bool peer_closed() const { return peer_closed_; }
  void close();

private:
  bool fill(std::chrono::steady_clock::time_point deadline); // false: timed out
  void write_all(std::string_view bytes, std::chrono::steady_clock::time_point deadline);
  std::optional<Record> take_buffered_record();
  void finish(Response& response) const;

  int fd_ = -1;
  bool keep_conn_ = true;
  bool peer_closed_ = false;
  Millis timeout_ = kDefaultTimeout;
  std::uint16_t next_id_ = 1;
  fcgi_host::records::RecordReader in_;       // bytes read, not yet taken as records
  std::map<std::uint16_t, Response> pending_; // responses in progress, by request id
};

} // namespace fcgi_test
