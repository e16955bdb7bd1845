#pragma once
// The FastCGI 1.0 record format, in one place: record types, roles and protocol statuses by
// name, the 8-byte header, name-value pairs, the encoders of every record the host, its clients
// and its tests send, and a reader that frames a byte stream into records. Everyone who writes or
// reads records uses these (the record guard, the worker's own answers, the master's status
// server, the status/ping client commands, the test client, the fuzz corpus, the request
// decoder); libfcgi encodes the handlers' responses and is the reference decoder of requests.
//
// Plain C++ over bytes: no sockets, no libfcgi. Installed with the test client, which speaks it.
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fcgi_host::records {

inline constexpr std::uint8_t kVersion = 1;
inline constexpr std::size_t kHeaderSize = 8;
inline constexpr std::size_t kRequestIdOffset = 2;     // the header's requestIdB1, then B0
inline constexpr std::size_t kPaddingLengthOffset = 6; // the header's paddingLength byte
inline constexpr std::size_t kMaxContent = 65535;
// The largest content whose record stays 8-byte aligned without padding (FastCGI 1.0, 3.3).
inline constexpr std::size_t kMaxAlignedContent = 65528;
inline constexpr std::uint16_t kNullRequestId = 0; // management records
inline constexpr std::uint8_t kKeepConn = 1;       // FCGI_KEEP_CONN, a BEGIN_REQUEST flag

enum class Type : std::uint8_t {
  BeginRequest = 1,
  AbortRequest = 2,
  EndRequest = 3,
  Params = 4,
  Stdin = 5,
  Stdout = 6,
  Stderr = 7,
  Data = 8,
  GetValues = 9,
  GetValuesResult = 10,
  UnknownType = 11,
};

enum class Role : std::uint16_t { Responder = 1, Authorizer = 2, Filter = 3 };

enum class ProtocolStatus : std::uint8_t {
  RequestComplete = 0,
  CantMpxConn = 1,
  Overloaded = 2,
  UnknownRole = 3,
};

// The variables a web server may ask for with GET_VALUES.
inline constexpr std::string_view kMaxConns = "FCGI_MAX_CONNS";
inline constexpr std::string_view kMaxReqs = "FCGI_MAX_REQS";
inline constexpr std::string_view kMpxsConns = "FCGI_MPXS_CONNS";

// "BEGIN_REQUEST", ..., "UNKNOWN_TYPE"; "unknown type" for any other byte.
const char* type_name(std::uint8_t type);
inline const char* type_name(Type type) {
  return type_name(static_cast<std::uint8_t>(type));
}

// ---- Header ------------------------------------------------------------------------------------

struct Header {
  std::uint8_t version = kVersion;
  std::uint8_t type = 0; // a Type, or any byte a peer sent
  std::uint16_t request_id = 0;
  std::uint16_t content_length = 0;
  std::uint8_t padding = 0;

  bool is(Type t) const { return type == static_cast<std::uint8_t>(t); }
  std::size_t record_size() const { return kHeaderSize + content_length + padding; }
};

// The header at `p`, which must hold kHeaderSize bytes.
inline Header decode_header(const char* p) {
  auto byte = [p](int i) { return static_cast<std::uint8_t>(p[i]); };
  return {byte(0), byte(1), static_cast<std::uint16_t>(byte(2) << 8 | byte(3)),
          static_cast<std::uint16_t>(byte(4) << 8 | byte(5)), byte(6)};
}

// The header's 8 bytes at `out`.
inline void encode_header(char* out, const Header& h) {
  out[0] = static_cast<char>(h.version);
  out[1] = static_cast<char>(h.type);
  out[2] = static_cast<char>(h.request_id >> 8);
  out[3] = static_cast<char>(h.request_id & 0xff);
  out[4] = static_cast<char>(h.content_length >> 8);
  out[5] = static_cast<char>(h.content_length & 0xff);
  out[6] = static_cast<char>(h.padding);
  out[7] = 0;
}
void append_header(std::string& out, const Header& header);
// `length` must be at most kMaxContent.
void append_header(std::string& out, std::uint8_t type, std::uint16_t id, std::size_t length,
                   std::uint8_t padding = 0);
inline void append_header(std::string& out, Type type, std::uint16_t id, std::size_t length,
                          std::uint8_t padding = 0) {
  append_header(out, static_cast<std::uint8_t>(type), id, length, padding);
}

// The padding that brings a record with `length` content bytes to a multiple of 8.
inline std::uint8_t aligning_padding(std::size_t length) {
  return static_cast<std::uint8_t>((8 - length % 8) % 8);
}

// ---- Name-value pairs --------------------------------------------------------------------------

// One pair; each length takes 1 byte below 128, else 4 bytes with the high bit set.
void append_name_value(std::string& out, std::string_view name, std::string_view value);

struct NameValue {
  std::string_view name;
  std::string_view value;
};

enum class PairStatus {
  Pair,      // `pair` holds the next pair, removed from the front of the data
  End,       // the data is empty
  Truncated, // a length runs past the end of the data (left as it was)
};

// One length field of a pair at p (FastCGI 1.0, 3.4): a byte below 128, else 4 bytes with the
// high bit set. False when it runs past `end`; else p moves past it. The one reader of the
// lengths: the params' scan (param_scan.cpp) and next_name_value() both run it.
inline bool read_length(const unsigned char*& p, const unsigned char* end, std::size_t& length) {
  if (p == end) return false;
  if (*p < 128) {
    length = *p++;
    return true;
  }
  if (end - p < 4) return false;
  length = static_cast<std::size_t>(p[0] & 0x7f) << 24 | static_cast<std::size_t>(p[1]) << 16 |
           static_cast<std::size_t>(p[2]) << 8 | p[3];
  p += 4;
  return true;
}

// Decodes the pair at the front of `data`; bounded by data.size() whatever the lengths say.
// Inline, over plain pointers. The request's params are read by the guard's one scan instead;
// this reads the rest: FCGI_GET_VALUES, the script gate's params, the test client's answers.
inline PairStatus next_name_value(std::string_view& data, NameValue& pair) {
  if (data.empty()) return PairStatus::End;
  const auto* p = reinterpret_cast<const unsigned char*>(data.data());
  const auto* const end = p + data.size();
  std::size_t lengths[2];
  for (std::size_t& length : lengths)
    if (!read_length(p, end, length)) return PairStatus::Truncated;
  const auto left = static_cast<std::size_t>(end - p);
  if (left < lengths[0] || left - lengths[0] < lengths[1]) return PairStatus::Truncated;
  const char* at = reinterpret_cast<const char*>(p);
  pair.name = std::string_view(at, lengths[0]);
  pair.value = std::string_view(at + lengths[0], lengths[1]);
  data = std::string_view(at + lengths[0] + lengths[1], left - lengths[0] - lengths[1]);
  return PairStatus::Pair;
}

// All pairs of a PARAMS or GET_VALUES body, views into `data`; false when it is truncated.
bool decode_name_values(std::string_view data, std::vector<NameValue>& out);

// ---- Record encoders ---------------------------------------------------------------------------

// One record; content.size() must be at most kMaxContent.
void append_record(std::string& out, Type type, std::uint16_t id, std::string_view content,
                   std::uint8_t padding = 0);
// A stream (PARAMS, STDIN, STDOUT, STDERR, DATA): `data` in records of at most `chunk` bytes
// (1..kMaxContent), each with `padding`, then the empty record that ends the stream.
void append_stream(std::string& out, Type type, std::uint16_t id, std::string_view data,
                   std::size_t chunk = kMaxContent, std::uint8_t padding = 0);

// The 8-byte BEGIN_REQUEST body: role, flags (kKeepConn), 5 reserved bytes.
std::array<char, 8> make_begin_request_body(Role role, std::uint8_t flags = 0);
void append_begin_request(std::string& out, std::uint16_t id, Role role, std::uint8_t flags = 0);
struct BeginRequest {
  std::uint16_t role = 0; // a Role, or any value a peer sent
  std::uint8_t flags = 0;
  bool keep_conn() const { return (flags & kKeepConn) != 0; }
};
// False when the body is shorter than 8 bytes.
bool decode_begin_request(std::string_view body, BeginRequest& out);
void append_abort_request(std::string& out, std::uint16_t id);

void append_end_request(std::string& out, std::uint16_t id, std::uint32_t app_status,
                        ProtocolStatus status);
void append_end_request(std::string& out, std::uint16_t id, std::uint32_t app_status,
                        std::uint8_t protocol_status);
// The end of a whole response: the empty FCGI_STDOUT that closes the stream, then
// FCGI_END_REQUEST (app status 0, FCGI_REQUEST_COMPLETE).
void append_response_end(std::string& out, std::uint16_t id);
struct EndRequest {
  std::uint32_t app_status = 0;
  std::uint8_t protocol_status = 0;
};
// False when the body is shorter than 8 bytes.
bool decode_end_request(std::string_view body, EndRequest& out);

// FastCGI 1.0, 4.2: the answer to a management record of a type the application does not know.
void append_unknown_type(std::string& out, std::uint8_t type);
// GET_VALUES asks for `names`; GET_VALUES_RESULT answers with encoded pairs, 8-byte aligned.
void append_get_values(std::string& out, const std::vector<std::string_view>& names);
void append_get_values_result(std::string& out, std::string_view pairs);

// A whole CGI response (Status line, a text body) as STDOUT records, the empty STDOUT record and
// END_REQUEST.
void append_error_response(std::string& out, std::uint16_t id, int status);

// ---- Framing -----------------------------------------------------------------------------------

struct RecordView {
  Header header;
  std::string_view content; // without the padding
};

// Takes the whole record at the front of `data` off it; false (data unchanged) while `data`
// does not hold a whole record.
bool take_record(std::string_view& data, RecordView& record);

// Frames a byte stream into records: append bytes as they arrive, take whole records as they
// complete, whatever the cut.
class RecordReader {
public:
  void append(std::string_view bytes);
  // The next whole record; its content stays valid until the next append() or take_rest().
  bool next(RecordView& record);
  // The bytes not taken as records yet (a record still incomplete, or whatever a peer sent).
  std::string_view rest() const { return std::string_view(buffer_).substr(taken_); }
  std::string take_rest();

private:
  std::string buffer_;
  std::size_t taken_ = 0; // bytes of buffer_ already taken as records
};

} // namespace fcgi_host::records
