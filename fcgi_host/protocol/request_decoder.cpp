#include "fcgi_host/protocol/request_decoder.hpp"

#include <cstring>

namespace fcgi_host {
namespace {

using records::Type;

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

// The records of one request: BEGIN_REQUEST into `out`, the PARAMS contents joined into
// `params`, the STDIN contents as views.
DecodeStatus decode_records(char* data, std::size_t size, DecodedRequest& out, ParamsRun& params,
                            std::string* why) {
  out.clear();
  enum class Expect { Begin, Params, Stdin, Nothing } expect = Expect::Begin;
  std::size_t pos = 0;
  while (pos < size) {
    if (size - pos < records::kHeaderSize) return malformed(why, "a record header cut short");
    const records::Header h = records::decode_header(data + pos);
    if (h.version != records::kVersion) return malformed(why, "a record of another version");
    if (size - pos < h.record_size()) return malformed(why, "a record cut short");
    char* content = data + pos + records::kHeaderSize;
    pos += h.record_size();
    if (expect != Expect::Begin && h.request_id != out.id)
      return malformed(why, "records of two requests");
    switch (expect) {
    case Expect::Begin: {
      records::BeginRequest begin;
      if (!h.is(Type::BeginRequest) || h.request_id == records::kNullRequestId ||
          !records::decode_begin_request(std::string_view(content, h.content_length), begin) ||
          h.content_length != 8)
        return malformed(why, "no BEGIN_REQUEST first");
      out.id = h.request_id;
      out.role = begin.role;
      out.keep_conn = begin.keep_conn();
      expect = Expect::Params;
      break;
    }
    case Expect::Params:
      if (!h.is(Type::Params)) return malformed(why, "a record other than PARAMS in the params");
      if (h.content_length == 0)
        expect = Expect::Stdin;
      else
        params.append(content, h.content_length);
      break;
    case Expect::Stdin:
      if (!h.is(Type::Stdin)) return malformed(why, "a record other than STDIN in the body");
      if (h.content_length == 0) {
        expect = Expect::Nothing;
      } else {
        out.body.emplace_back(content, h.content_length);
        out.body_size += h.content_length;
      }
      break;
    case Expect::Nothing:
      return malformed(why, "records after the end of the body");
    }
  }
  if (expect != Expect::Nothing) return malformed(why, "the request ends before its empty STDIN");
  return DecodeStatus::Whole;
}

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
  params.clear();
  scanned = nullptr;
  params_base = nullptr;
  body.clear();
  body_size = 0;
}

DecodeStatus decode_request(char* data, std::size_t size, const DecodeLimits& limits,
                            DecodedRequest& out, std::string* why) {
  ParamsRun params;
  if (DecodeStatus s = decode_records(data, size, out, params, why); s != DecodeStatus::Whole)
    return s;
  std::string_view pairs(params.begin ? params.begin : data, params.size);
  for (records::NameValue pair;;) {
    records::PairStatus status = records::next_name_value(pairs, pair);
    if (status == records::PairStatus::End) break;
    if (status == records::PairStatus::Truncated)
      return malformed(why, "a param whose length runs past the params");
    if (limits.max_params && out.params.size() >= limits.max_params) {
      if (why) *why = "more params than the limit";
      return DecodeStatus::TooManyParams;
    }
    out.params.push_back(pair);
  }
  return DecodeStatus::Whole;
}

DecodeStatus decode_scanned_request(char* data, std::size_t size, const ScannedParams& scanned,
                                    DecodedRequest& out, std::string* why) {
  ParamsRun params;
  if (DecodeStatus s = decode_records(data, size, out, params, why); s != DecodeStatus::Whole)
    return s;
  if (params.size != scanned.size) return malformed(why, "params other than the guard scanned");
  out.scanned = &scanned;
  out.params_base = params.begin ? params.begin : data;
  return DecodeStatus::Whole;
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
