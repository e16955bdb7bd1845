#include "fcgi_host/protocol/capture_file.hpp"

#include "fcgi_host/protocol/records.hpp"

namespace fcgi_host::capture {
namespace {

constexpr std::uint16_t kReplayId = 1;

// The text lines up to the empty one; returns the offset of the first record.
std::size_t read_fields(std::string_view file, CapturedRequest& out) {
  std::size_t eol = file.find('\n');
  if (eol == std::string_view::npos || file.substr(0, eol) != kFileMagic)
    throw FileError("not a fcgi-host request capture (its first line is not \"" +
                    std::string(kFileMagic) + "\")");
  std::size_t at = eol + 1;
  for (;;) {
    eol = file.find('\n', at);
    if (eol == std::string_view::npos)
      throw FileError("truncated: the text lines do not end with an empty line");
    std::string_view line = file.substr(at, eol - at);
    at = eol + 1;
    if (line.empty()) return at;
    std::size_t colon = line.find(": ");
    if (colon == std::string_view::npos)
      throw FileError("line \"" + std::string(line) + "\" is not \"key: value\"");
    out.fields.emplace_back(line.substr(0, colon), line.substr(colon + 2));
  }
}

std::string at_byte(std::size_t offset) {
  return " at byte " + std::to_string(offset);
}

} // namespace

std::string CapturedRequest::field(std::string_view key) const {
  for (const auto& [k, v] : fields)
    if (k == key) return v;
  return {};
}

std::string CapturedRequest::param(std::string_view name) const {
  for (const auto& [k, v] : params)
    if (k == name) return v;
  return {};
}

void CapturedRequest::set_param(std::string_view name, std::string_view value) {
  for (auto& [k, v] : params)
    if (k == name) {
      v = value;
      return;
    }
  params.emplace_back(name, value);
}

CapturedRequest read_capture(std::string_view file) {
  CapturedRequest out;
  const std::size_t start = read_fields(file, out);
  std::string_view rest = file.substr(start);
  enum class Expect { Begin, Params, Body, Done } expect = Expect::Begin;
  std::string params;
  while (expect != Expect::Done) {
    const std::size_t offset = file.size() - rest.size();
    records::RecordView r;
    if (rest.empty() || !records::take_record(rest, r))
      throw FileError("truncated: the records end" +
                      std::string(rest.empty() ? "" : " inside a record") + at_byte(offset) +
                      (expect == Expect::Body ? " before the end of the body" : ""));
    auto is = [&r](records::Type t) { return r.header.is(t); };
    if (expect == Expect::Begin && is(records::Type::BeginRequest)) {
      expect = Expect::Params;
    } else if (expect == Expect::Params && is(records::Type::Params)) {
      params += r.content;
      if (r.content.empty()) expect = Expect::Body;
    } else if (expect == Expect::Body && is(records::Type::Stdin)) {
      out.body += r.content;
      if (r.content.empty()) expect = Expect::Done;
    } else {
      throw FileError(std::string("a ") + records::type_name(r.header.type) + " record" +
                      at_byte(offset) + " where a request has " +
                      (expect == Expect::Begin    ? "BEGIN_REQUEST"
                       : expect == Expect::Params ? "PARAMS"
                                                  : "STDIN"));
    }
  }
  std::vector<records::NameValue> pairs;
  if (!records::decode_name_values(params, pairs))
    throw FileError("the params are cut short (a name or value runs past their end)");
  for (const records::NameValue& p : pairs)
    out.params.emplace_back(p.name, p.value);
  if (!rest.empty())
    throw FileError(std::to_string(rest.size()) + " bytes after the end of the request" +
                    at_byte(file.size() - rest.size()));
  return out;
}

std::string encode_request(const CapturedRequest& request) {
  std::string params;
  for (const auto& [name, value] : request.params)
    records::append_name_value(params, name, value);
  std::string out;
  records::append_begin_request(out, kReplayId, records::Role::Responder);
  records::append_stream(out, records::Type::Params, kReplayId, params);
  records::append_stream(out, records::Type::Stdin, kReplayId, request.body);
  return out;
}

} // namespace fcgi_host::capture
