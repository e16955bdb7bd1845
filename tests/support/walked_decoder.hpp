#pragma once
// A second reading of a framed request, for the tests: walk its records one by one (BEGIN,
// PARAMS, their empty end, STDIN, its empty end, one id) and read every pair. The host decodes
// only from where its record guard found the records (protocol/request_decoder.hpp); this walk,
// and libfcgi (protocol/reference_decoder.hpp), are what the tests hold that path equal to.
#include "fcgi_host/protocol/records.hpp"

#include <cstring>
#include <string>
#include <string_view>
#include <vector>

namespace test_support {

namespace records = fcgi_host::records;

enum class WalkStatus { Whole, Malformed, TooManyParams };

struct WalkedRequest {
  std::uint16_t id = 0;
  std::uint16_t role = 0;
  bool keep_conn = false;
  std::vector<records::NameValue> params; // views into the bytes walked
  std::vector<std::string_view> body;
  std::size_t body_size = 0;
};

// Walks data[0, size); PARAMS records are joined in place first (a pair split across records is
// one view). `max_params` 0: no limit. `why` (optional) says what was malformed.
inline WalkStatus walk_request(char* data, std::size_t size, std::size_t max_params,
                               WalkedRequest& out, std::string* why = nullptr) {
  out = WalkedRequest{};
  auto malformed = [why](const char* what) {
    if (why) *why = what;
    return WalkStatus::Malformed;
  };
  enum class Expect { Begin, Params, Stdin, Nothing } expect = Expect::Begin;
  char* params = nullptr;
  std::size_t params_size = 0;
  for (std::size_t pos = 0; pos < size;) {
    if (size - pos < records::kHeaderSize) return malformed("a record header cut short");
    const records::Header h = records::decode_header(data + pos);
    if (h.version != records::kVersion) return malformed("a record of another version");
    if (size - pos < h.record_size()) return malformed("a record cut short");
    char* content = data + pos + records::kHeaderSize;
    pos += h.record_size();
    if (expect != Expect::Begin && h.request_id != out.id)
      return malformed("records of two requests");
    switch (expect) {
    case Expect::Begin: {
      records::BeginRequest begin;
      if (!h.is(records::Type::BeginRequest) || h.request_id == records::kNullRequestId ||
          !records::decode_begin_request(std::string_view(content, h.content_length), begin) ||
          h.content_length != 8)
        return malformed("no BEGIN_REQUEST first");
      out.id = h.request_id;
      out.role = begin.role;
      out.keep_conn = begin.keep_conn();
      expect = Expect::Params;
      break;
    }
    case Expect::Params:
      if (!h.is(records::Type::Params))
        return malformed("a record other than PARAMS in the params");
      if (h.content_length == 0) {
        expect = Expect::Stdin;
      } else {
        if (!params)
          params = content;
        else if (content != params + params_size)
          std::memmove(params + params_size, content, h.content_length);
        params_size += h.content_length;
      }
      break;
    case Expect::Stdin:
      if (!h.is(records::Type::Stdin)) return malformed("a record other than STDIN in the body");
      if (h.content_length == 0) {
        expect = Expect::Nothing;
      } else {
        out.body.emplace_back(content, h.content_length);
        out.body_size += h.content_length;
      }
      break;
    case Expect::Nothing:
      return malformed("records after the end of the body");
    }
  }
  if (expect != Expect::Nothing) return malformed("the request ends before its empty STDIN");
  std::string_view pairs(params ? params : data, params_size);
  for (records::NameValue pair;;) {
    const records::PairStatus status = records::next_name_value(pairs, pair);
    if (status == records::PairStatus::End) break;
    if (status == records::PairStatus::Truncated)
      return malformed("a param whose length runs past the params");
    if (max_params && out.params.size() >= max_params) {
      if (why) *why = "more params than the limit";
      return WalkStatus::TooManyParams;
    }
    out.params.push_back(pair);
  }
  return WalkStatus::Whole;
}

} // namespace test_support
