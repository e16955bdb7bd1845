#include "fcgi_host/protocol/records.hpp"

#include "app/response.hpp"
#include "fcgi_host/protocol/cgi_head.hpp"

#include <algorithm>
#include <cstring>

namespace fcgi_host::records {

const char* type_name(std::uint8_t type) {
  static const char* const names[] = {"type 0",
                                      "BEGIN_REQUEST",
                                      "ABORT_REQUEST",
                                      "END_REQUEST",
                                      "PARAMS",
                                      "STDIN",
                                      "STDOUT",
                                      "STDERR",
                                      "DATA",
                                      "GET_VALUES",
                                      "GET_VALUES_RESULT",
                                      "UNKNOWN_TYPE"};
  return type < std::size(names) ? names[type] : "unknown type";
}

void append_header(std::string& out, const Header& h) {
  char bytes[kHeaderSize];
  encode_header(bytes, h);
  out.append(bytes, sizeof bytes);
}

void append_header(std::string& out, std::uint8_t type, std::uint16_t id, std::size_t length,
                   std::uint8_t padding) {
  append_header(out, Header{kVersion, type, id, static_cast<std::uint16_t>(length), padding});
}

// ---- Name-value pairs --------------------------------------------------------------------------

namespace {

void append_length(std::string& out, std::size_t n) {
  if (n < 128) {
    out.push_back(static_cast<char>(n));
    return;
  }
  const char bytes[4] = {static_cast<char>(((n >> 24) & 0x7f) | 0x80),
                         static_cast<char>((n >> 16) & 0xff), static_cast<char>((n >> 8) & 0xff),
                         static_cast<char>(n & 0xff)};
  out.append(bytes, sizeof bytes);
}

} // namespace

void append_name_value(std::string& out, std::string_view name, std::string_view value) {
  append_length(out, name.size());
  append_length(out, value.size());
  out.append(name).append(value);
}

bool decode_name_values(std::string_view data, std::vector<NameValue>& out) {
  for (;;) {
    NameValue pair;
    switch (next_name_value(data, pair)) {
    case PairStatus::Pair:
      out.push_back(pair);
      break;
    case PairStatus::End:
      return true;
    case PairStatus::Truncated:
      return false;
    }
  }
}

// ---- Record encoders ---------------------------------------------------------------------------

void append_record(std::string& out, Type type, std::uint16_t id, std::string_view content,
                   std::uint8_t padding) {
  append_header(out, type, id, content.size(), padding);
  out.append(content);
  if (padding) out.append(padding, '\0');
}

void append_stream(std::string& out, Type type, std::uint16_t id, std::string_view data,
                   std::size_t chunk, std::uint8_t padding) {
  chunk = std::clamp<std::size_t>(chunk, 1, kMaxContent);
  for (std::size_t pos = 0; pos < data.size(); pos += chunk)
    append_record(out, type, id, data.substr(pos, chunk), padding);
  append_record(out, type, id, {}, padding); // the empty record ends the stream
}

std::array<char, 8> make_begin_request_body(Role role, std::uint8_t flags) {
  auto r = static_cast<std::uint16_t>(role);
  return {static_cast<char>(r >> 8), static_cast<char>(r & 0xff), static_cast<char>(flags)};
}

void append_begin_request(std::string& out, std::uint16_t id, Role role, std::uint8_t flags) {
  std::array<char, 8> body = make_begin_request_body(role, flags);
  append_record(out, Type::BeginRequest, id, std::string_view(body.data(), body.size()));
}

bool decode_begin_request(std::string_view body, BeginRequest& out) {
  if (body.size() < 8) return false;
  out.role = static_cast<std::uint16_t>(std::uint8_t(body[0]) << 8 | std::uint8_t(body[1]));
  out.flags = static_cast<std::uint8_t>(body[2]);
  return true;
}

void append_abort_request(std::string& out, std::uint16_t id) {
  append_record(out, Type::AbortRequest, id, {});
}

namespace {

// FCGI_END_REQUEST, header and body, into the 16 bytes at `at`.
void put_end_request(char* at, std::uint16_t id, std::uint32_t app_status,
                     std::uint8_t protocol_status) {
  const char record[kHeaderSize + 8] = {static_cast<char>(kVersion),
                                        static_cast<char>(Type::EndRequest),
                                        static_cast<char>(id >> 8),
                                        static_cast<char>(id & 0xff),
                                        0,
                                        8, // content length
                                        0,
                                        0,
                                        static_cast<char>(app_status >> 24),
                                        static_cast<char>((app_status >> 16) & 0xff),
                                        static_cast<char>((app_status >> 8) & 0xff),
                                        static_cast<char>(app_status & 0xff),
                                        static_cast<char>(protocol_status),
                                        0,
                                        0,
                                        0};
  std::memcpy(at, record, sizeof record);
}

} // namespace

void append_end_request(std::string& out, std::uint16_t id, std::uint32_t app_status,
                        std::uint8_t protocol_status) {
  // Header and body in one piece, one append: it ends every request.
  char record[kHeaderSize + 8];
  put_end_request(record, id, app_status, protocol_status);
  out.append(record, sizeof record);
}

void append_response_end(std::string& out, std::uint16_t id) {
  // The two records in one piece, one append: they end every buffered response.
  char records[kHeaderSize + kHeaderSize + 8] = {
      static_cast<char>(kVersion), static_cast<char>(Type::Stdout), static_cast<char>(id >> 8),
      static_cast<char>(id & 0xff)};
  put_end_request(records + kHeaderSize, id, 0,
                  static_cast<std::uint8_t>(ProtocolStatus::RequestComplete));
  out.append(records, sizeof records);
}

void append_end_request(std::string& out, std::uint16_t id, std::uint32_t app_status,
                        ProtocolStatus status) {
  append_end_request(out, id, app_status, static_cast<std::uint8_t>(status));
}

bool decode_end_request(std::string_view body, EndRequest& out) {
  if (body.size() < 8) return false;
  auto byte = [&](int i) { return static_cast<std::uint32_t>(std::uint8_t(body[i])); };
  out.app_status = byte(0) << 24 | byte(1) << 16 | byte(2) << 8 | byte(3);
  out.protocol_status = static_cast<std::uint8_t>(byte(4));
  return true;
}

void append_unknown_type(std::string& out, std::uint8_t type) {
  const char body[8] = {static_cast<char>(type)};
  append_record(out, Type::UnknownType, kNullRequestId, std::string_view(body, sizeof body));
}

void append_get_values(std::string& out, const std::vector<std::string_view>& names) {
  std::string pairs;
  for (std::string_view name : names)
    append_name_value(pairs, name, {});
  append_record(out, Type::GetValues, kNullRequestId, pairs);
}

void append_get_values_result(std::string& out, std::string_view pairs) {
  append_record(out, Type::GetValuesResult, kNullRequestId, pairs, aligning_padding(pairs.size()));
}

void append_error_response(std::string& out, std::uint16_t id, int status) {
  std::string text;
  cgi::append_status_line(text, status);
  cgi::append_header_line(text, "Content-Type", "text/plain");
  text.append("\r\n").append(app::reason_phrase(status)).append("\n");
  append_record(out, Type::Stdout, id, text);
  append_record(out, Type::Stdout, id, {});
  append_end_request(out, id, 0, ProtocolStatus::RequestComplete);
}

// ---- Framing -----------------------------------------------------------------------------------

bool take_record(std::string_view& data, RecordView& record) {
  if (data.size() < kHeaderSize) return false;
  Header h = decode_header(data.data());
  if (data.size() < h.record_size()) return false;
  record.header = h;
  record.content = data.substr(kHeaderSize, h.content_length);
  data.remove_prefix(h.record_size());
  return true;
}

void RecordReader::append(std::string_view bytes) {
  if (taken_ > 0 && taken_ >= buffer_.size() / 2) { // keeps the copying linear overall
    buffer_.erase(0, taken_);
    taken_ = 0;
  }
  buffer_.append(bytes);
}

bool RecordReader::next(RecordView& record) {
  std::string_view rest = this->rest();
  if (!take_record(rest, record)) return false;
  taken_ = buffer_.size() - rest.size();
  return true;
}

std::string RecordReader::take_rest() {
  std::string rest = buffer_.substr(taken_);
  buffer_.clear();
  taken_ = 0;
  return rest;
}

} // namespace fcgi_host::records
