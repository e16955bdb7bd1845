#include "fcgi_host/protocol/request_decoder.hpp"

#include <cstring>

namespace fcgi_host {
namespace {

DecodeStatus malformed(std::string* why, const char* what) {
  if (why) *why = what;
  return DecodeStatus::Malformed;
}

// The params of the request, as one run of bytes: the contents of its PARAMS records moved
// together in place, each right after the one before (over the headers and padding between
// them, which nobody reads again). One record, the usual case, moves nothing.
struct ParamsRun {
  char* begin = nullptr;
  std::size_t size = 0;
  void append(char* content, std::size_t length) {
    if (!begin) {
      begin = content;
    } else if (content != begin + size) {
      std::memmove(begin + size, content, length);
    }
    size += length;
  }
};

// The content of the record whose header is at data[at], when it lies within data[0, size).
bool record_content(char* data, std::size_t size, std::size_t at, char*& content,
                    std::size_t& length) {
  if (at > size || size - at < records::kHeaderSize) return false;
  length = records::decode_header(data + at).content_length;
  content = data + at + records::kHeaderSize;
  return size - at - records::kHeaderSize >= length;
}

} // namespace

void DecodedRequest::clear() {
  id = role = 0;
  keep_conn = false;
  scanned = nullptr;
  params_base = nullptr;
  body.clear();
  body_size = 0;
}

DecodeStatus decode_guarded_request(char* data, std::size_t size, const RequestFraming& framing,
                                    DecodedRequest& out, std::string* why) {
  out.clear();
  // The guard closes a connection whose BEGIN_REQUEST asks for another role.
  out.id = framing.request_id;
  out.role = static_cast<std::uint16_t>(records::Role::Responder);
  out.keep_conn = framing.keep_conn;
  char* content = nullptr;
  std::size_t length = 0;
  ParamsRun params;
  for (std::size_t at : framing.params_records) {
    if (!record_content(data, size, at, content, length))
      return malformed(why, "a PARAMS record past the request");
    params.append(content, length);
  }
  if (params.size != framing.params->size)
    return malformed(why, "params other than the guard scanned");
  out.scanned = framing.params;
  out.params_base = params.begin ? params.begin : data;
  for (std::size_t at : framing.stdin_records) {
    if (!record_content(data, size, at, content, length))
      return malformed(why, "a STDIN record past the request");
    out.body.emplace_back(content, length);
    out.body_size += length;
  }
  return DecodeStatus::Whole;
}

} // namespace fcgi_host
