#include "fcgi_host/protocol/capture_redaction.hpp"

#include "app/url_encoding.hpp" // hex_value
#include "fcgi_host/protocol/records.hpp"

#include <cstdint>
#include <cstring>

namespace fcgi_host::capture {
namespace {

// Longer names are not compared: their values are redacted.
constexpr std::size_t kMaxName = 256;
constexpr char kFiller = 'x';
constexpr std::string_view kFormType = "application/x-www-form-urlencoded";

char lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

bool starts_with_nocase(std::string_view text, std::string_view prefix) {
  if (text.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i)
    if (lower(text[i]) != lower(prefix[i])) return false;
  return true;
}

bool matches_any(std::string_view name, std::span<const std::string> patterns) {
  for (std::string_view p : kBuiltinRedactions)
    if (name_matches(p, name)) return true;
  for (const std::string& p : patterns)
    if (name_matches(p, name)) return true;
  return false;
}

void note_name(RedactionReport& report, std::string_view prefix, std::string_view name) {
  ++report.redacted;
  std::size_t need = (report.names_size ? 1 : 0) + prefix.size() + name.size();
  if (report.names_size + need > sizeof report.names) return; // cut to fit: the count stays
  if (report.names_size) report.names[report.names_size++] = ' ';
  for (char c : prefix)
    report.names[report.names_size++] = c;
  for (char c : name)
    report.names[report.names_size++] = c;
}

// A name collected byte by byte, as it may be split across records.
struct Name {
  char bytes[kMaxName];
  std::size_t size = 0; // bytes seen (may exceed kMaxName)
  void clear() { size = 0; }
  void add(char c) {
    if (size < kMaxName) bytes[size] = c;
    ++size;
  }
  bool too_long() const { return size > kMaxName; }
  std::string_view text() const { return {bytes, size < kMaxName ? size : kMaxName}; }
};

// An urlencoded body or query string, `name=value&name=value`, a byte at a time. Names are
// compared percent-decoded (`pass%77ord` is `password`), `+` as a space. `prefix` names where the
// field was in the report ("form:", "query:").
class FormScanner {
public:
  FormScanner(std::span<const std::string> patterns, RedactionReport& report,
              std::string_view prefix)
      : patterns_(patterns), report_(report), prefix_(prefix) {}
  void feed(char* p, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
      step(p[i]);
  }
  void step(char& c) {
    if (c == '&') {
      reset();
      return;
    }
    if (in_value_) {
      if (redact_) c = kFiller;
      return;
    }
    if (c != '=') {
      add_name_byte(c);
      return;
    }
    in_value_ = true;
    redact_ = name_.too_long() || matches_any(name_.text(), patterns_);
    if (redact_) note_name(report_, prefix_, name_.text());
  }
  // The start of another field list.
  void reset() {
    in_value_ = redact_ = false;
    name_.clear();
    escape_ = 0;
  }

private:
  void add_name_byte(char c) {
    if (escape_ == 0 && c == '%') {
      escape_ = 1;
      return;
    }
    if (escape_ == 1) {
      first_ = c;
      escape_ = 2;
      return;
    }
    if (escape_ == 2) {
      escape_ = 0;
      int hi = app::hex_value(first_), lo = app::hex_value(c);
      if (hi < 0 || lo < 0) { // not an escape: kept as sent
        name_.add('%');
        name_.add(first_);
        name_.add(c);
        return;
      }
      name_.add(static_cast<char>(hi * 16 + lo));
      return;
    }
    name_.add(c == '+' ? ' ' : c);
  }

  std::span<const std::string> patterns_;
  RedactionReport& report_;
  std::string_view prefix_;
  Name name_;
  bool in_value_ = false;
  bool redact_ = false;
  int escape_ = 0; // 1: after '%', 2: after its first digit
  char first_ = 0;
};

// The params stream (the PARAMS records' contents one after the other), a byte at a time.
class ParamsScanner {
public:
  ParamsScanner(std::span<const std::string> patterns, RedactionReport& report)
      : patterns_(patterns), report_(report), query_fields_(patterns, report, "query:") {}
  void feed(char* p, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i)
      step(p[i]);
  }
  bool form_body() const { return starts_with_nocase({type_, type_size_}, kFormType); }

private:
  enum class Stage { NameLength, ValueLength, Name, Value };

  // A length: 1 byte below 128, else 4 bytes with the high bit set. True when complete.
  bool take_length_byte(char c, std::size_t& length) {
    auto b = static_cast<std::uint8_t>(c);
    if (length_have_ == 0 && b < 128) {
      length = b;
      return true;
    }
    length_bytes_[length_have_++] = b;
    if (length_have_ < 4) return false;
    length = static_cast<std::size_t>(length_bytes_[0] & 0x7f) << 24 |
             static_cast<std::size_t>(length_bytes_[1]) << 16 |
             static_cast<std::size_t>(length_bytes_[2]) << 8 | length_bytes_[3];
    length_have_ = 0;
    return true;
  }

  void name_done() {
    std::string_view name = name_.text();
    redact_ = name_.too_long() || matches_any(name, patterns_);
    if (redact_) note_name(report_, "", name);
    content_type_ = !name_.too_long() && name == "CONTENT_TYPE";
    // The query's fields, by the forms' rules: a token in a URL is as secret as in a form.
    query_fields_.reset();
    query_ = redact_ || name_.too_long() ? Query::None
             : name == "QUERY_STRING"    ? Query::Fields
             : name == "REQUEST_URI"     ? Query::Path
                                         : Query::None;
    stage_ = value_length_ ? Stage::Value : Stage::NameLength;
  }

  void step(char& c) {
    switch (stage_) {
    case Stage::NameLength:
      if (take_length_byte(c, name_length_)) stage_ = Stage::ValueLength;
      return;
    case Stage::ValueLength:
      if (!take_length_byte(c, value_length_)) return;
      name_.clear();
      stage_ = Stage::Name;
      if (name_length_ == 0) name_done();
      return;
    case Stage::Name:
      name_.add(c);
      if (name_.size == name_length_) name_done();
      return;
    case Stage::Value:
      if (content_type_ && type_size_ < sizeof type_) type_[type_size_++] = c;
      if (redact_) c = kFiller;
      if (query_ == Query::Fields)
        query_fields_.step(c);
      else if (query_ == Query::Path && c == '?')
        query_ = Query::Fields;
      if (--value_length_ == 0) stage_ = Stage::NameLength;
      return;
    }
  }

  std::span<const std::string> patterns_;
  RedactionReport& report_;
  Stage stage_ = Stage::NameLength;
  std::uint8_t length_bytes_[4]{};
  std::size_t length_have_ = 0;
  std::size_t name_length_ = 0, value_length_ = 0;
  Name name_;
  bool redact_ = false;
  bool content_type_ = false;
  // In a value: REQUEST_URI before its '?', then QUERY_STRING's or REQUEST_URI's fields.
  enum class Query { None, Path, Fields };
  Query query_ = Query::None;
  FormScanner query_fields_;
  char type_[64]{};
  std::size_t type_size_ = 0;
};

} // namespace

bool name_matches(std::string_view pattern, std::string_view name) {
  // Iterative glob: on a mismatch, retry from the byte after the last `*`'s start.
  std::size_t p = 0, n = 0, star = std::string_view::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || lower(pattern[p]) == lower(name[n]))) {
      ++p;
      ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*')
    ++p;
  return p == pattern.size();
}

CaptureShape fit_records(char* buf, std::size_t size) {
  CaptureShape shape;
  std::size_t at = 0;
  while (size - at >= records::kHeaderSize) {
    records::Header h = records::decode_header(buf + at);
    const std::size_t content_at = at + records::kHeaderSize;
    if (h.record_size() > size - at) {
      // Incomplete: a STDIN record keeps the content present, the rest is left out.
      if (!h.is(records::Type::Stdin) || shape.params_end == 0) break;
      std::size_t present = size - content_at;
      if (present > h.content_length) present = h.content_length;
      buf[at + 4] = static_cast<char>(present >> 8);
      buf[at + 5] = static_cast<char>(present & 0xff);
      buf[at + records::kPaddingLengthOffset] = 0;
      shape.body_bytes += present;
      shape.cut = true;
      at = content_at + present;
      break;
    }
    if (h.is(records::Type::Params) && h.content_length == 0) shape.params_end = at + 8;
    if (h.is(records::Type::Stdin)) {
      shape.body_bytes += h.content_length;
      if (h.content_length == 0) {
        shape.body_ended = true;
        at += h.record_size();
        break;
      }
    }
    at += h.record_size();
  }
  shape.size = at;
  if (!shape.body_ended && shape.params_end != 0) shape.cut = true;
  return shape;
}

std::size_t redact_uri_query(char* uri, std::size_t size, std::span<const std::string> patterns) {
  RedactionReport report;
  FormScanner query(patterns, report, "query:");
  if (char* q = static_cast<char*>(std::memchr(uri, '?', size)))
    query.feed(q + 1, static_cast<std::size_t>(uri + size - q - 1));
  return report.redacted;
}

void redact_records(char* buf, std::size_t size, std::span<const std::string> patterns,
                    RedactionReport& report) {
  ParamsScanner params(patterns, report);
  FormScanner form(patterns, report, "form:");
  bool params_seen = false, form_body = false;
  for (std::size_t at = 0; size - at >= records::kHeaderSize;) {
    records::Header h = records::decode_header(buf + at);
    if (h.record_size() > size - at) break;
    char* content = buf + at + records::kHeaderSize;
    if (h.is(records::Type::Params)) {
      params.feed(content, h.content_length);
      params_seen = true;
    } else if (h.is(records::Type::Stdin)) {
      if (params_seen) form_body = params.form_body();
      params_seen = false;
      if (form_body) form.feed(content, h.content_length);
    }
    at += h.record_size();
  }
}

} // namespace fcgi_host::capture
